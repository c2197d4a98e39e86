//! The synchronisation primitives the queue is built on, in one place (as in
//! tokio's `loom` module): the standard library's normally, loom's when the
//! queue's own tests are model-checked (`scripts/loom.sh`, the `loom` feature). The
//! queue imports them only from here, so the checked code is the shipped code.

#[cfg(all(test, feature = "loom"))]
pub(super) use loom::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
#[cfg(all(test, feature = "loom"))]
pub(super) use loom::sync::{Arc, Mutex, MutexGuard};

#[cfg(not(all(test, feature = "loom")))]
pub(super) use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
#[cfg(not(all(test, feature = "loom")))]
pub(super) use std::sync::{Arc, Mutex, MutexGuard};

/// Locks `m`. A panic under one of the queue's locks leaves nothing half done
/// (each critical section is a push, a swap or a list edit), so poisoning is ignored.
pub(super) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}
