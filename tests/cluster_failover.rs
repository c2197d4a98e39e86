//! The bus on a Redis Cluster with replicas, through a failover that ends
//! none of its sessions: a master demoted while none of its slots' channels
//! was subscribed keeps its connection, and the bus must stop treating it as
//! the master of those slots, or a channel subscribed there later (now a
//! replica, which still hears the shard's messages) and on its new master
//! delivers every event twice.

mod common;

#[allow(dead_code)]
#[path = "common/faults/cluster.rs"]
mod replicated;

use std::sync::Arc;
use std::time::Duration;

use common::redis_server::redis_bus;
use common::sink::Recorder;
use common::wait_until;
use genmcp::prelude::*;
use replicated::RedisCluster;

/// The port of the master `server` replicates (`ROLE` of a replica).
fn master_of(cluster: &RedisCluster, server: usize) -> u16 {
    let role = cluster.servers[server].query(&["ROLE"]).expect("ROLE");
    let mut lines = role.lines();
    assert_eq!(lines.next(), Some("slave"), "{role}");
    lines
        .nth(1)
        .and_then(|p| p.parse().ok())
        .expect("the master's port")
}

#[test]
fn a_master_demoted_silently_never_delivers_a_channel_twice() {
    let dir = std::env::temp_dir().join(format!("genmcp-failover-{}", std::process::id()));
    let cluster = RedisCluster::start(&dir);
    let url = cluster.url();
    let prefix = "fo:";
    let listener: Bus<u32> = redis_bus(&url, prefix);
    // A replica, and a topic whose slot its master serves (a key of that
    // slot is answered there, any other is MOVED).
    let replica = cluster.replicas()[0];
    let old_port = master_of(&cluster, replica);
    let old = cluster
        .servers
        .iter()
        .position(|s| s.port == old_port)
        .expect("the master is one of the servers");
    let topic = (0..10_000)
        .map(|i| format!("t{i}"))
        .find(|t| {
            cluster.servers[old]
                .query(&["EXISTS", &format!("{prefix}{t}")])
                .is_some()
        })
        .expect("a topic on that master");
    // The failover, with nothing of that shard subscribed: no session ends.
    // Redis aborts a manual failover that does not complete in time (a
    // loaded machine): asked again, three times at most.
    let switched = || {
        cluster.servers[replica]
            .query(&["ROLE"])
            .is_some_and(|r| r.starts_with("master"))
            && cluster.servers[old]
                .query(&["ROLE"])
                .is_some_and(|r| r.starts_with("slave"))
    };
    let failed_over = (0..3).any(|_| {
        let promoted = cluster.servers[replica]
            .query(&["ROLE"])
            .is_some_and(|r| r.starts_with("master"));
        if !promoted {
            assert_eq!(
                cluster.servers[replica]
                    .query(&["CLUSTER", "FAILOVER"])
                    .as_deref(),
                Some("OK")
            );
        }
        wait_until(Duration::from_secs(15), switched)
    });
    assert!(failed_over, "the replica never took over its master");
    assert!(cluster.wait_ok(Duration::from_secs(20)));
    // Subscribed now; then another shard's connections are cut, so the
    // listener reads the slot map again and reaches the new master.
    let got = Arc::new(Recorder::default());
    let _sub = listener.subscribe(topic.clone(), Inbox::from_sink(got.clone()));
    let other = (0..cluster.servers.len())
        .find(|&i| {
            i != old
                && i != replica
                && cluster.servers[i]
                    .query(&["ROLE"])
                    .is_some_and(|r| r.starts_with("master"))
        })
        .expect("another master");
    let _ = cluster.servers[other].query(&["CLIENT", "KILL", "TYPE", "normal"]);
    let channel = format!("{prefix}{topic}");
    assert!(
        wait_until(Duration::from_secs(20), || {
            cluster.servers[replica]
                .query(&["PUBSUB", "SHARDCHANNELS"])
                .is_some_and(|c| c.lines().any(|l| l == channel))
        }),
        "the listener subscribed the channel on its new master"
    );
    // A node started after the failover publishes: each event once.
    let publisher: Bus<u32> = redis_bus(&url, prefix);
    for i in 0..20 {
        publisher.try_publish(&topic, i).expect("published");
    }
    assert!(
        wait_until(Duration::from_secs(10), || got.got().len() >= 20),
        "got {:?}",
        got.got()
    );
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(got.got(), (0..20).collect::<Vec<u32>>(), "each event once");
    drop(cluster);
    let _ = std::fs::remove_dir_all(&dir);
}
