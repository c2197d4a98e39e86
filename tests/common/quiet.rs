//! A subscription handler that accepts every listen, never sends, and counts
//! `handle_close`: for tests about a stream's lifecycle, not its content.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use genmcp::prelude::*;

/// Accepts every listen (advertising `toolsListChanged`), sends nothing,
/// counts `handle_close` in `closed`.
pub struct Quiet {
    /// How many times `handle_close` ran.
    pub closed: Arc<AtomicUsize>,
}

impl SubscriptionHandler for Quiet {
    type Message = ();
    type State = ();

    fn subscribe(&self, _f: &SubscriptionFilter, _cx: &mut SubscribeCx<'_, ()>) -> Subscribe<()> {
        Subscribe::Accept(())
    }

    fn handle_message(&self, _msg: (), _channel: &Channel, _state: &mut ()) -> Flow {
        Flow::Continue
    }

    fn handle_close(&self, _channel: &Channel, _state: ()) {
        self.closed.fetch_add(1, Ordering::SeqCst);
    }

    fn subscription_capabilities(&self, _channel: &Channel) -> SubscriptionCapabilities {
        SubscriptionCapabilities::none().with_tools_list_changed(true)
    }
}
