//! [`WakeSlot`]: a waker that stays registered after it is woken.

use std::task::Waker;

use super::sync::{Mutex, lock};

/// A waker that stays registered after it is woken (unlike `AtomicWaker`,
/// whose `wake` takes it): for signals to a task whose waker does not
/// change, so the task registers once instead of on every poll. Built on
/// the queue's primitives, so the loom models check it where the queue uses
/// it (the topic log's readers).
pub(crate) struct WakeSlot {
    waker: Mutex<Option<Waker>>,
}

impl Default for WakeSlot {
    fn default() -> Self {
        WakeSlot {
            waker: Mutex::new(None),
        }
    }
}

impl std::fmt::Debug for WakeSlot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WakeSlot").finish_non_exhaustive()
    }
}

impl WakeSlot {
    /// Registers `waker` unless an equivalent one is already there.
    pub(crate) fn register(&self, waker: &Waker) {
        let mut slot = lock(&self.waker);
        if !slot.as_ref().is_some_and(|w| w.will_wake(waker)) {
            *slot = Some(waker.clone());
        }
    }

    /// Wakes the registered task, if any; it stays registered.
    pub(crate) fn wake(&self) {
        if let Some(waker) = lock(&self.waker).as_ref() {
            waker.wake_by_ref();
        }
    }
}
