//! A reader that never reads: the stream is cut as `Overflow` and the server's
//! memory stays bounded. Alone in its test binary, so the process's resident
//! memory is this test's alone.

mod common;

use std::time::Duration;

use common::probe::{self, Mode, send};
use common::{listen, wait_until};
use genmcp::prelude::*;
use serde_json::json;

fn caps() -> SubscriptionCapabilities {
    SubscriptionCapabilities::none().with_resources_updated(true)
}

#[test]
fn a_reader_that_never_reads_overflows_and_memory_stays_bounded() {
    let srv = probe::start(Mode::Accept, caps(), probe::config());
    let uri = format!("res://{}", "x".repeat(1000));
    let mut s = listen(
        srv.addr(),
        json!("slow"),
        json!({"resourceSubscriptions": [uri.clone()]}),
    );
    s.next_message().unwrap();
    srv.wait_subscribers(1);
    let before = genmcp_cli::bench::resident_kib();
    // 100k events of ~1 KiB: ~100 MiB if anything buffered them without bound.
    let mut delivered = 0u64;
    for _ in 0..100_000 {
        delivered += srv
            .bus
            .publish("all", send(Notification::resource_updated(uri.clone())))
            as u64;
        if delivered > 0 && srv.bus.subscribers("all").is_empty() {
            break;
        }
    }
    assert!(
        wait_until(Duration::from_secs(15), || srv
            .metrics()
            .closed(CloseReason::Overflow)
            == 1),
        "the stream was not ended as overflow: {:?}",
        srv.metrics()
    );
    let grown = genmcp_cli::bench::resident_kib().saturating_sub(before);
    assert!(grown < 48 * 1024, "server memory grew by {grown} KiB");
    assert!(
        delivered < 100_000,
        "a lagging stream must not accept everything"
    );
    assert!(srv.bus.subscribers("all").is_empty());
    assert_eq!(
        srv.closed().len(),
        1,
        "overflow is a teardown the handler did not choose: handle_close runs once"
    );
    assert!(wait_until(Duration::from_secs(5), || srv
        .metrics()
        .open_streams
        == 0));
    // The client sees an abrupt end, never a completion result.
    s.set_timeout(Duration::from_secs(10));
    let mut saw_completion = false;
    while let Ok(Some(ev)) = s.try_next_event() {
        if let common::Event::Message(m) = ev {
            saw_completion |= m.get("result").is_some();
        }
    }
    assert!(!saw_completion);
}
