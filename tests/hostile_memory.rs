//! 40 listens, each carrying 1 MiB of junk in `_meta`, leave the server holding
//! well under 25 MiB in total: the junk is dropped, not kept for the life of the
//! stream. Alone in its test binary, so the process's resident memory is this
//! test's alone (the server runs in this process).

mod common;

use common::probe::{self, Mode};
use common::{Exchange, headers, request, wait_until};
use genmcp::prelude::*;
use serde_json::{Value, json};
use std::time::Duration;

const STREAMS: usize = 40;

/// A listen body whose `_meta` carries ~1 MiB of short strings.
fn junk_listen(id: usize, junk: &Value) -> Vec<u8> {
    let mut meta = common::meta();
    meta["junk"] = junk.clone();
    request(
        json!(id),
        "subscriptions/listen",
        json!({"_meta": meta, "notifications": {"toolsListChanged": true}}),
    )
    .to_string()
    .into_bytes()
}

#[test]
fn forty_listens_with_1_mib_of_meta_junk_leave_well_under_25_mib() {
    let mut config = probe::config();
    // A disconnect on an idle stream is noticed at the next keep-alive.
    config.keep_alive = Duration::from_millis(100);
    let srv = probe::start(
        Mode::Accept,
        SubscriptionCapabilities::none().with_tools_list_changed(true),
        config,
    );
    let n = 150_000;
    let junk = Value::Array(
        (0..n)
            .map(|i| json!(format!("{:04x}", i % 65_536)))
            .collect(),
    );
    let bodies: Vec<Vec<u8>> = (0..=STREAMS).map(|i| junk_listen(i, &junk)).collect();
    assert!(bodies[0].len() > 1024 * 1024, "{}", bodies[0].len());
    drop(junk);
    let n_streams = STREAMS;
    let start = genmcp_cli::bench::resident_kib();
    // One listen first, kept open: parsing a 1 MiB body of short strings costs
    // ~20 MiB for a moment; the allocator keeps that room for the next request.
    // After it, what is measured is what the open streams keep.
    let mut warm = Exchange::open(
        srv.addr(),
        &headers("subscriptions/listen", None),
        &bodies[0],
    );
    assert_eq!(warm.status, 200);
    warm.next_message().expect("ack");
    let before = genmcp_cli::bench::resident_kib();
    let mut open = vec![warm];
    for body in &bodies[1..] {
        let mut s = Exchange::open(srv.addr(), &headers("subscriptions/listen", None), body);
        assert_eq!(s.status, 200);
        let ack = s.next_message().expect("ack");
        assert_eq!(ack["method"], "notifications/subscriptions/acknowledged");
        open.push(s);
    }
    assert!(wait_until(Duration::from_secs(5), || srv
        .metrics()
        .open_streams
        == STREAMS + 1));
    let after = genmcp_cli::bench::resident_kib();
    let total = after.saturating_sub(start);
    let kept = after.saturating_sub(before);
    eprintln!(
        "resident memory: +{total} KiB for {} junk listens (one parse peak included), +{kept} KiB for the last {n_streams}",
        STREAMS + 1
    );
    assert!(
        total < 25 * 1024,
        "{} listens with 1 MiB of _meta junk each grew the server by {total} KiB",
        STREAMS + 1
    );
    assert!(
        kept < 16 * 1024,
        "{n_streams} open listens keep {kept} KiB: the junk is held"
    );
    drop(open);
}
