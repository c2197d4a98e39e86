//! What `subscribe` can set up: a message to itself, an attached event stream,
//! and the stream limits.

mod common;

use common::listen;
use genmcp::prelude::*;
use serde_json::json;

struct Setup;

impl SubscriptionHandler for Setup {
    type Message = &'static str;
    type State = Vec<&'static str>;

    fn subscribe(
        &self,
        _filter: &SubscriptionFilter,
        cx: &mut SubscribeCx<'_, &'static str>,
    ) -> Subscribe<Self::State> {
        cx.notify_self("initial");
        cx.attach(futures_util::stream::iter(["a", "b", "c"]));
        // A clone of the inbox kept by a background task, like an app's event source.
        let inbox = cx.inbox();
        std::thread::spawn(move || {
            std::thread::sleep(std::time::Duration::from_millis(200));
            let _ = inbox.try_send("late");
        });
        Subscribe::Accept(Vec::new())
    }

    fn handle_message(&self, msg: &'static str, channel: &Channel, seen: &mut Self::State) -> Flow {
        seen.push(msg);
        let _ = channel.send_notification(Notification::resource_updated(format!("seen://{msg}")));
        if msg == "late" {
            Flow::stop("done")
        } else {
            Flow::Continue
        }
    }

    fn subscription_capabilities(&self, _channel: &Channel) -> SubscriptionCapabilities {
        SubscriptionCapabilities::none().with_resources_updated(true)
    }
}

fn server(config: HttpConfig) -> ServerThread {
    ServerThread::spawn(
        || {
            Suite::builder(Implementation::new("setup", "1"))
                .subscriptions(Setup)
                .build()
        },
        config,
    )
    .expect("server starts")
}

#[test]
fn notify_self_and_attached_streams_come_after_the_ack_and_do_not_end_the_stream() {
    let srv = server(common::config());
    let uris: Vec<String> = ["initial", "a", "b", "c", "late"]
        .iter()
        .map(|m| format!("seen://{m}"))
        .collect();
    let mut s = listen(srv.addr, json!(1), json!({"resourceSubscriptions": uris}));
    assert_eq!(
        s.next_message().unwrap()["method"],
        "notifications/subscriptions/acknowledged"
    );
    let mut got = Vec::new();
    for _ in 0..5 {
        got.push(
            s.next_message().unwrap()["params"]["uri"]
                .as_str()
                .unwrap()
                .to_owned(),
        );
    }
    // The message to itself is handled after the ack; the attached stream's items
    // arrive in order; the stream outlives the attached stream's end.
    assert!(got.contains(&"seen://initial".to_owned()));
    let attached: Vec<&String> = got
        .iter()
        .filter(|u| ["seen://a", "seen://b", "seen://c"].contains(&u.as_str()))
        .collect();
    assert_eq!(attached, vec!["seen://a", "seen://b", "seen://c"]);
    assert_eq!(got.last().map(String::as_str), Some("seen://late"));
    let done = s.next_message().unwrap();
    assert_eq!(done["result"]["resultType"], "complete");
}

#[test]
fn the_global_stream_limit_refuses_with_an_internal_error() {
    let mut config = common::config();
    config.limits.max_streams = 2;
    let srv = server(config);
    let mut a = listen(
        srv.addr,
        json!("a"),
        json!({"resourceSubscriptions": ["seen://x"]}),
    );
    let mut b = listen(
        srv.addr,
        json!("b"),
        json!({"resourceSubscriptions": ["seen://x"]}),
    );
    a.next_message().unwrap();
    b.next_message().unwrap();
    let resp = listen(
        srv.addr,
        json!("c"),
        json!({"resourceSubscriptions": ["seen://x"]}),
    )
    .into_response();
    assert_eq!(resp.status, 200);
    let body = resp.json();
    assert_eq!(body["id"], "c");
    assert_eq!(body["error"]["code"], -32603);
    assert_eq!(body["error"]["message"], "Subscription limit reached");
    // Closing one frees its slot.
    a.disconnect();
    assert!(common::wait_until(
        std::time::Duration::from_secs(20),
        || srv.server.metrics().open_streams < 2
    ));
    let mut c = listen(
        srv.addr,
        json!("c2"),
        json!({"resourceSubscriptions": ["seen://x"]}),
    );
    assert_eq!(
        c.next_message().unwrap()["method"],
        "notifications/subscriptions/acknowledged"
    );
}
