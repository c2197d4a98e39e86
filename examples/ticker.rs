//! A handler whose events come from a timer attached in `subscribe`: every stream
//! that subscribes to `clock://now` gets `notifications/resources/updated` once a
//! second, and after ten ticks the handler ends the stream gracefully.
//!
//! ```sh
//! cargo run --example ticker            # serves http://127.0.0.1:8080/mcp
//! ```

use std::time::Duration;

use genmcp::prelude::*;

const CLOCK: &str = "clock://now";

struct Ticker;

impl SubscriptionHandler for Ticker {
    type Message = u32;
    /// Ticks seen by this stream.
    type State = u32;

    fn subscribe(
        &self,
        filter: &SubscriptionFilter,
        cx: &mut SubscribeCx<'_, u32>,
    ) -> Subscribe<u32> {
        if !filter.resource_subscriptions.iter().any(|u| u == CLOCK) {
            return Subscribe::Reject(McpError::invalid_params(format!("subscribe to {CLOCK}")));
        }
        // Only the clock: other URIs are narrowed away.
        let honoured = SubscriptionFilter {
            resource_subscriptions: vec![CLOCK.to_owned()],
            ..Default::default()
        };
        cx.attach(futures_util::stream::unfold(0u32, |n| async move {
            tokio::time::sleep(Duration::from_secs(1)).await;
            Some((n + 1, n + 1))
        }));
        Subscribe::Narrow(honoured, 0)
    }

    fn handle_message(&self, tick: u32, channel: &Channel, seen: &mut u32) -> Flow {
        *seen += 1;
        if channel
            .send_notification(Notification::resource_updated(CLOCK))
            .is_err()
            || tick >= 10
        {
            return Flow::stop("ten ticks");
        }
        Flow::Continue
    }

    fn subscription_capabilities(&self, _channel: &Channel) -> SubscriptionCapabilities {
        SubscriptionCapabilities::none().with_resources_updated(true)
    }
}

#[actix_web::main]
async fn main() -> std::io::Result<()> {
    let suite = Suite::builder(Implementation::new("ticker", "0.1.0"))
        .subscriptions(Ticker)
        .build();
    genmcp::http::serve(suite, HttpConfig::default()).await
}
