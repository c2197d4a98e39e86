//! An [`InboxSink`] that keeps what it is sent, for the tests of the bus.

use std::sync::Mutex;

use genmcp::pubsub::{DeliverFuture, InboxError, InboxSink};

/// Keeps what it is sent, and counts the requests to complete.
#[derive(Default)]
pub struct Recorder {
    got: Mutex<Vec<u32>>,
    completed: Mutex<usize>,
}

impl Recorder {
    /// What it was sent, in order.
    pub fn got(&self) -> Vec<u32> {
        self.got.lock().unwrap().clone()
    }

    /// Whether it was sent `n`.
    pub fn has(&self, n: u32) -> bool {
        self.got.lock().unwrap().contains(&n)
    }

    /// How often it was asked to complete.
    pub fn completed(&self) -> usize {
        *self.completed.lock().unwrap()
    }
}

impl InboxSink<u32> for Recorder {
    fn try_deliver(&self, msg: u32) -> Result<(), InboxError> {
        self.got.lock().unwrap().push(msg);
        Ok(())
    }

    fn deliver(&self, msg: u32) -> DeliverFuture {
        let r = self.try_deliver(msg);
        Box::pin(async move { r })
    }

    fn is_closed(&self) -> bool {
        false
    }

    fn complete(&self) {
        *self.completed.lock().unwrap() += 1;
    }
}
