//! `Bus::sync` on a real redis-server: once it returns, every message Redis
//! ran before it has been handed to this node's subscribers (what a stream
//! handoff between nodes stands on); it fails, within its bound, when Redis
//! is gone.

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::redis_server::{RedisServer, block_on, redis_bus};
use common::sink::Recorder;
use genmcp::pubsub::{Bus, BusError, Inbox};

#[test]
fn after_a_sync_every_message_redis_ran_before_it_has_been_delivered() {
    let redis = RedisServer::start();
    let a: Bus<u32> = redis_bus(&redis.url(), "t-sync:");
    let b: Bus<u32> = redis_bus(&redis.url(), "t-sync:");
    let rec = Arc::new(Recorder::default());
    let _sub = b.subscribe("t", Inbox::from_sink(rec.clone()));
    block_on(b.subscribed());
    for n in 0..40u32 {
        a.try_publish("t", n).expect("published");
        // a's own marker follows its publish: Redis has run the publish
        // once a's sync returns.
        block_on(a.sync()).expect("a synced");
        // b's marker is run after that: the message reached b before it.
        block_on(b.sync()).expect("b synced");
        let got = rec.got();
        assert_eq!(
            got.last(),
            Some(&n),
            "b's sync returned before {n} was delivered: {got:?}"
        );
    }
    assert_eq!(rec.got(), (0..40).collect::<Vec<_>>());
    // A node's marker is its own: nothing of it reaches a subscriber, and
    // it is not counted as a dropped message.
    let dropped: u64 = genmcp::pubsub::redis::dropped_messages()
        .iter()
        .map(|(_, n)| n)
        .sum();
    assert_eq!(dropped, 0);
}

#[test]
fn a_sync_fails_within_its_bound_when_redis_is_gone() {
    let mut redis = RedisServer::start();
    let b: Bus<u32> = redis_bus(&redis.url(), "t-sync-gone:");
    block_on(b.sync()).expect("synced while Redis runs");
    redis.kill();
    let result = block_on(async { tokio::time::timeout(Duration::from_secs(20), b.sync()).await });
    let result = result.expect("the sync ended by itself");
    assert!(
        matches!(result, Err(BusError::Unavailable { .. })),
        "{result:?}"
    );
}

#[test]
fn an_embedded_bus_syncs_at_once() {
    let bus: Bus<u32> = Bus::new();
    assert_eq!(block_on(bus.sync()), Ok(()));
}
