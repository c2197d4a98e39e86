//! Durable subscriptions on a real redis-server: a subscription the node
//! depends on survives a cut connection (`CLIENT KILL TYPE pubsub`) and a
//! Redis restart; the bus says `Connected` again (and raises its epoch) only
//! once it is subscribed again, and hears every event published after that.
//! An ordinary subscription is completed and forgotten, as before.

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::redis_server::{RedisCluster, RedisServer, block_on, bus_config, redis_bus};
use common::sink::Recorder;
use common::wait_until;
use genmcp::pubsub::{Bus, BusHealth, Inbox};

/// Waits for `bus` to start a new epoch after `epoch`; checks that the
/// channel is subscribed on Redis by then, and that the bus says connected.
fn wait_new_epoch(bus: &Bus<u32>, epoch: u64, redis: &RedisServer, channel: &str) {
    assert!(
        wait_until(Duration::from_secs(15), || bus.epoch() > epoch),
        "the bus never connected again"
    );
    assert_eq!(bus.health(), BusHealth::Connected);
    assert_eq!(
        redis.subscribers(channel),
        1,
        "the bus reported a new epoch before {channel} was subscribed again"
    );
}

/// Publishes `n` from `a` until `rec` has it (a publisher that has not
/// reconnected yet fails; bounded).
fn publish_until_heard(a: &Bus<u32>, n: u32, rec: &Recorder) {
    let heard = wait_until(Duration::from_secs(10), || {
        let _ = a.try_publish("ctl", n);
        std::thread::sleep(Duration::from_millis(50));
        rec.got().contains(&n)
    });
    assert!(
        heard,
        "the durable subscription never heard {n}: {:?}",
        rec.got()
    );
}

#[test]
fn a_durable_subscription_hears_again_after_a_cut_and_a_restart() {
    let mut redis = RedisServer::start();
    let prefix = "t-durable:";
    let channel = format!("{prefix}ctl");
    let a: Bus<u32> = redis_bus(&redis.url(), prefix);
    let b: Bus<u32> = redis_bus(&redis.url(), prefix);
    let durable = Arc::new(Recorder::default());
    let plain = Arc::new(Recorder::default());
    let _durable = b.subscribe_durable("ctl", Inbox::from_sink(durable.clone()));
    let _plain = b.subscribe("plain", Inbox::from_sink(plain.clone()));
    block_on(b.subscribed());
    assert_eq!(redis.subscribers(&channel), 1);
    assert!(a.try_publish("ctl", 1).is_ok());
    assert!(wait_until(Duration::from_secs(5), || durable.got() == [1]));

    // Every subscription connection cut, as a failover or a dropped
    // connection does.
    let epoch = b.epoch();
    let killed = redis.command(&["CLIENT", "KILL", "TYPE", "pubsub"]);
    assert!(
        killed.as_deref().is_some_and(|r| r.starts_with(':')),
        "{killed:?}"
    );
    wait_new_epoch(&b, epoch, &redis, &channel);
    publish_until_heard(&a, 2, &durable);
    // The ordinary subscription was completed and forgotten.
    assert_eq!(plain.completed(), 1);
    assert_eq!(durable.completed(), 0);
    assert_eq!(b.topic_count(), 1, "only the durable topic is left");

    // Redis restarted (it forgot every subscription).
    let epoch = b.epoch();
    redis.restart();
    wait_new_epoch(&b, epoch, &redis, &channel);
    publish_until_heard(&a, 3, &durable);
    assert_eq!(durable.completed(), 0);

    // Dropping the guard still unsubscribes.
    drop(_durable);
    assert!(wait_until(Duration::from_secs(5), || redis
        .subscribers(&channel)
        == 0));
}

#[test]
fn the_epoch_is_raised_once_per_new_session_and_waits_can_be_awaited() {
    let redis = RedisServer::start();
    let b: Bus<u32> = redis_bus(&redis.url(), "t-epoch:");
    assert_eq!(b.epoch(), 1, "the first connection is epoch 1");
    let mut epochs = b.epochs();
    let rec = Arc::new(Recorder::default());
    let _sub = b.subscribe_durable("x", Inbox::from_sink(rec.clone()));
    block_on(b.subscribed());
    assert_eq!(redis.subscribers("t-epoch:x"), 1);
    redis.command(&["CLIENT", "KILL", "TYPE", "pubsub"]);
    let next =
        block_on(async { tokio::time::timeout(Duration::from_secs(15), epochs.changed()).await });
    assert_eq!(next, Ok(Some(2)));
    assert_eq!(redis.subscribers("t-epoch:x"), 1);
    // An embedded bus has no epochs.
    let embedded: Bus<u32> = Bus::new();
    assert_eq!(embedded.epoch(), 0);
    block_on(embedded.subscribed());
}

/// One topic per master of `cluster`, with the master serving it.
fn one_topic_per_master(cluster: &RedisCluster, prefix: &str) -> Vec<(String, usize)> {
    let mut topics: Vec<(String, usize)> = Vec::new();
    for i in 0..1000 {
        let topic = format!("ctl-{i}");
        let owner = cluster.owner(cluster.keyslot(&format!("{prefix}{topic}")));
        if topics.iter().all(|(_, o)| *o != owner) {
            topics.push((topic, owner));
        }
        if topics.len() == 3 {
            return topics;
        }
    }
    panic!("no topic on every master among 1000 names")
}

#[test]
fn a_durable_subscription_is_subscribed_again_on_a_shards_return() {
    let mut cluster = RedisCluster::start();
    let prefix = "t-durable-cl:";
    let connect = || -> Bus<u32> {
        block_on(Bus::redis(bus_config(&cluster.url(), prefix))).expect("the cluster bus connects")
    };
    let (a, b) = (connect(), connect());
    let topics = one_topic_per_master(&cluster, prefix);
    let subs: Vec<_> = topics
        .iter()
        .map(|(topic, owner)| {
            let r = Arc::new(Recorder::default());
            let sub = b.subscribe_durable(topic.clone(), Inbox::from_sink(r.clone()));
            (topic.clone(), *owner, r, sub)
        })
        .collect();
    block_on(b.subscribed());
    for (topic, owner, _, _) in &subs {
        assert!(
            cluster
                .shard_channels(*owner)
                .contains(&format!("{prefix}{topic}")),
            "{topic} on master {owner}"
        );
    }

    let lost = 1;
    let (lost_topic, _, lost_rec, _) = subs
        .iter()
        .find(|(_, owner, _, _)| *owner == lost)
        .expect("a topic on the lost master");
    let epoch = b.epoch();
    cluster.nodes[lost].kill();
    // B notices (its publishes to that shard fail), and keeps the
    // subscription.
    assert!(wait_until(Duration::from_secs(10), || matches!(
        b.try_publish(lost_topic, 0),
        Err((_, genmcp::pubsub::BusError::Unavailable { .. }))
    )));
    assert_eq!(lost_rec.completed(), 0);

    cluster.nodes[lost].restart();
    assert!(
        cluster.wait_ok(Duration::from_secs(20)),
        "the cluster is whole again"
    );
    assert!(
        wait_until(Duration::from_secs(20), || b.epoch() > epoch),
        "the shard's return raised the epoch"
    );
    let channel = format!("{prefix}{lost_topic}");
    assert!(
        cluster.shard_channels(lost).contains(&channel),
        "the epoch was raised before {channel} was subscribed again"
    );
    let heard = wait_until(Duration::from_secs(10), || {
        let _ = a.try_publish(lost_topic, 5);
        std::thread::sleep(Duration::from_millis(50));
        lost_rec.got().contains(&5)
    });
    assert!(
        heard,
        "the durable subscription on the returned shard hears again"
    );
    assert_eq!(lost_rec.completed(), 0);
}

/// A shard's confirmations of many subscriptions at once do not count
/// against its bound of waiting push messages (`max_inbound`): a node with
/// more topics on one shard than that bound still subscribes them all, and
/// again after its connections are cut.
#[test]
fn more_topics_on_a_shard_than_its_push_bound_are_subscribed_and_heard() {
    let cluster = RedisCluster::start();
    let prefix = "t-many-cl:";
    let connect = |max_inbound: usize| -> Bus<u32> {
        let mut config = bus_config(&cluster.url(), prefix);
        config.max_inbound = max_inbound;
        block_on(Bus::redis(config)).expect("the cluster bus connects")
    };
    let (a, b) = (connect(1_024), connect(32));
    // About 40 channels per master: more than 32 on each.
    let topics: Vec<String> = (0..120).map(|i| format!("many-{i}")).collect();
    let recorders: Vec<_> = topics
        .iter()
        .map(|t| {
            let r = Arc::new(Recorder::default());
            let sub = b.subscribe_durable(t.clone(), Inbox::from_sink(r.clone()));
            (r, sub)
        })
        .collect();
    let subscribed =
        block_on(async { tokio::time::timeout(Duration::from_secs(15), b.subscribed()).await });
    assert!(subscribed.is_ok(), "the topics were never all subscribed");
    let heard_all = |value: u32| {
        wait_until(Duration::from_secs(15), || {
            // Paced: the messages themselves stay within the bound.
            for (t, (r, _)) in topics.iter().zip(&recorders) {
                if !r.got().contains(&value) {
                    let _ = a.try_publish(t, value);
                    std::thread::sleep(Duration::from_millis(3));
                }
            }
            std::thread::sleep(Duration::from_millis(50));
            recorders.iter().all(|(r, _)| r.got().contains(&value))
        })
    };
    assert!(heard_all(1), "every topic hears the other node");
    // Every connection cut: each shard subscribes them all again.
    let epoch = b.epoch();
    for node in &cluster.nodes {
        let _ = node.command(&["CLIENT", "KILL", "TYPE", "normal", "SKIPME", "yes"]);
        let _ = node.command(&["CLIENT", "KILL", "TYPE", "pubsub", "SKIPME", "yes"]);
    }
    assert!(
        wait_until(Duration::from_secs(20), || b.epoch() > epoch),
        "the bus never subscribed its topics again"
    );
    assert!(heard_all(2), "every topic hears the other node again");
}
