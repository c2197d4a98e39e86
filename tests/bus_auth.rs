//! With a shared key, the Redis bus carries only what the nodes sent: a
//! message written by anyone else who can reach Redis is dropped (`forged`),
//! a captured one published again is dropped (`replayed`), both counted; the
//! nodes' own messages still flow. Real redis-server, real HTTP streams.

mod common;

use std::time::Duration;

use common::redis_server::{RedisServer, block_on, bus_config};
use common::{listen, wait_until};
use genmcp::http::ServerThread;
use genmcp::mux::SharedNotification;
use genmcp::prelude::*;
use genmcp::pubsub::redis::{DropReason, dropped_messages};
use genmcp_cli::demo::{self, topics};
use serde_json::json;

type Events = Bus<SharedNotification>;

const KEY: [u8; 32] = [0x5a; 32];

fn keyed_bus(redis: &RedisServer, prefix: &str, key: &[u8; 32]) -> Events {
    block_on(Bus::redis(bus_config(&redis.url(), prefix).key(key))).expect("the bus connects")
}

fn node(bus: &Events) -> ServerThread {
    let mut config = common::config();
    config.workers = 2;
    let bus = bus.clone();
    ServerThread::spawn(move || demo::suite_with(bus, Some(KEY)).0, config).expect("node starts")
}

fn numbered(seq: usize) -> SharedNotification {
    let mut params = serde_json::Map::new();
    params.insert("seq".into(), json!(seq));
    Notification::new("notifications/tools/list_changed", params).into()
}

fn dropped(reason: DropReason) -> u64 {
    dropped_messages()
        .into_iter()
        .find(|(r, _)| *r == reason)
        .map_or(0, |(_, n)| n)
}

/// A raw Redis client (no genmcp code): what an attacker on the network has.
fn raw_client(redis: &RedisServer) -> redis::Connection {
    redis::Client::open(redis.url())
        .and_then(|c| c.get_connection())
        .expect("a raw Redis connection")
}

fn raw_publish(redis: &RedisServer, channel: &str, payload: &[u8]) {
    let mut con = raw_client(redis);
    let receivers: i64 = redis::cmd("PUBLISH")
        .arg(channel)
        .arg(payload)
        .query(&mut con)
        .expect("PUBLISH");
    assert!(receivers >= 1, "a node listens on {channel}");
}

/// One node (B) with a stream open on the tools topic, a publishing node (A)
/// with the same key, and a raw `PSUBSCRIBE` capturing what crosses Redis.
struct Setup {
    redis: RedisServer,
    channel: String,
    a: Events,
    _b: Events,
    _node_b: ServerThread,
    stream: common::Exchange,
    capture: redis::Connection,
}

fn setup(prefix: &str) -> Setup {
    let redis = RedisServer::start();
    let channel = format!("{prefix}{}", topics::TOOLS);
    let a = keyed_bus(&redis, prefix, &KEY);
    let b = keyed_bus(&redis, prefix, &KEY);
    let node_b = node(&b);
    let mut stream = listen(node_b.addr, json!(1), json!({"toolsListChanged": true}));
    stream.next_message().expect("acknowledged");
    stream.set_timeout(Duration::from_secs(5));
    assert!(
        wait_until(Duration::from_secs(10), || redis.subscribers(&channel) == 1),
        "node B subscribed"
    );
    let mut capture = raw_client(&redis);
    capture
        .set_read_timeout(Some(Duration::from_secs(5)))
        .expect("timeout");
    capture
        .send_packed_command(
            &redis::cmd("PSUBSCRIBE")
                .arg(format!("{prefix}*"))
                .get_packed_command(),
        )
        .expect("PSUBSCRIBE");
    let _confirm = capture.recv_response().expect("psubscribed");
    Setup {
        redis,
        channel,
        a,
        _b: b,
        _node_b: node_b,
        stream,
        capture,
    }
}

impl Setup {
    /// Publishes `seq` from node A: the stream gets it, and so does the
    /// capture (returned: the bytes that crossed Redis).
    fn publish(&mut self, seq: usize) -> Vec<u8> {
        assert!(self.a.try_publish(topics::TOOLS, numbered(seq)).is_ok());
        let got = self.stream.next_message().expect("the event from node A");
        assert_eq!(got["params"]["seq"], seq, "{got}");
        let captured = self.capture.recv_response().expect("captured");
        let redis::Value::Array(parts) = captured else {
            panic!("a pmessage: {captured:?}")
        };
        match parts.last() {
            Some(redis::Value::BulkString(payload)) => payload.clone(),
            other => panic!("a payload: {other:?}"),
        }
    }
}

#[test]
fn messages_written_from_scratch_on_redis_are_not_delivered_and_are_counted() {
    let mut s = setup("t-forged:");
    let genuine = s.publish(1);
    let (forged_before, malformed_before) =
        (dropped(DropReason::Forged), dropped(DropReason::Malformed));

    // The format of earlier builds: node id, then JSON.
    let body = String::from_utf8_lossy(&genuine[58..]).replace("\"seq\":1", "\"seq\":100");
    raw_publish(
        &s.redis,
        &s.channel,
        format!("00000000000000ff{body}").as_bytes(),
    );
    // A genuine frame with its JSON changed: the tag no longer matches.
    let mut bent = genuine[..58].to_vec();
    bent.extend_from_slice(body.as_bytes());
    raw_publish(&s.redis, &s.channel, &bent);
    // A genuine frame with a newer sequence number and another node id.
    let mut renumbered = genuine.clone();
    renumbered[17] = renumbered[17].wrapping_add(9);
    renumbered[2] ^= 0x40;
    raw_publish(&s.redis, &s.channel, &renumbered);
    // A frame without any tag (what a node without the key sends).
    let mut untagged = genuine.clone();
    untagged[26..58].fill(0);
    raw_publish(&s.redis, &s.channel, &untagged);

    // The next event the stream gets is node A's next one: none of the above.
    s.publish(2);
    assert!(
        wait_until(Duration::from_secs(5), || dropped(DropReason::Forged)
            >= forged_before + 3),
        "three forgeries counted: {:?}",
        dropped_messages()
    );
    assert!(dropped(DropReason::Malformed) > malformed_before);
}

#[test]
fn a_captured_message_published_again_is_not_delivered_a_second_time() {
    let mut s = setup("t-replay:");
    let first = s.publish(1);
    let second = s.publish(2);
    let replayed_before = dropped(DropReason::Replayed);
    raw_publish(&s.redis, &s.channel, &first);
    raw_publish(&s.redis, &s.channel, &second);
    s.publish(3);
    assert!(
        wait_until(Duration::from_secs(5), || dropped(DropReason::Replayed)
            >= replayed_before + 2),
        "two replays counted: {:?}",
        dropped_messages()
    );
}

#[test]
fn nodes_with_the_same_key_hear_each_other_and_not_a_node_with_another() {
    let redis = RedisServer::start();
    let prefix = "t-keys:";
    let channel = format!("{prefix}{}", topics::TOOLS);
    let a = keyed_bus(&redis, prefix, &KEY);
    let stranger = keyed_bus(&redis, prefix, &[0x33; 32]);
    let b = keyed_bus(&redis, prefix, &KEY);
    let node_b = node(&b);
    let mut stream = listen(node_b.addr, json!(1), json!({"toolsListChanged": true}));
    stream.next_message().expect("acknowledged");
    stream.set_timeout(Duration::from_secs(5));
    assert!(wait_until(Duration::from_secs(10), || redis
        .subscribers(&channel)
        == 1));
    let forged_before = dropped(DropReason::Forged);
    for seq in 0..20 {
        assert!(
            stranger
                .try_publish(topics::TOOLS, numbered(1000 + seq))
                .is_ok()
        );
        assert!(a.try_publish(topics::TOOLS, numbered(seq)).is_ok());
    }
    for seq in 0..20 {
        let got = stream.next_message().expect("node A's events");
        assert_eq!(got["params"]["seq"], seq, "{got}");
    }
    assert!(
        wait_until(Duration::from_secs(5), || dropped(DropReason::Forged)
            >= forged_before + 20),
        "the other key's 20 events were dropped as forged: {:?}",
        dropped_messages()
    );
}
