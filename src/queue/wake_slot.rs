//! [`WakeSlot`]: a waker that stays registered after it is woken.

use std::sync::{Mutex, MutexGuard};
use std::task::Waker;

/// A waker that stays registered after it is woken (unlike `AtomicWaker`,
/// whose `wake` takes it): for rare signals to a task whose waker does not
/// change, so the task registers once instead of on every poll.
#[derive(Debug, Default)]
pub(crate) struct WakeSlot {
    waker: Mutex<Option<Waker>>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
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
