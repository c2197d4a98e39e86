//! The bus on a real three-master Redis Cluster (`redis+cluster://`, started
//! by the test with `redis-server --cluster-enabled yes` and
//! `redis-cli --cluster create` on free loopback ports): events cross nodes
//! through sharded pub/sub, each topic only through the master of its slot;
//! set-once keys, records and the notes' two-key script work; losing one
//! master completes only the streams whose topics live on it, and the bus
//! reaches it again when it is back.

#[path = "../../tests/common/mod.rs"]
mod common;

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::redis_server::{RedisCluster, block_on, bus_config};
use common::wait_until;
use genmcp::prelude::*;
use genmcp::pubsub::{BusError, BusHealth, DeliverFuture, InboxError, InboxSink};
use genmcp_cli::demo::Notes;

/// A stream's mailbox for the tests: records what it gets, and whether it
/// was asked to complete.
#[derive(Default)]
struct Recorder {
    got: Mutex<Vec<u32>>,
    completed: AtomicBool,
}

impl InboxSink<u32> for Recorder {
    fn try_deliver(&self, msg: u32) -> Result<(), InboxError> {
        if self.completed.load(Ordering::SeqCst) {
            return Err(InboxError::Closed);
        }
        self.got.lock().unwrap_or_else(|p| p.into_inner()).push(msg);
        Ok(())
    }
    fn deliver(&self, msg: u32) -> DeliverFuture {
        let r = self.try_deliver(msg);
        Box::pin(async move { r })
    }
    fn is_closed(&self) -> bool {
        self.completed.load(Ordering::SeqCst)
    }
    fn complete(&self) {
        self.completed.store(true, Ordering::SeqCst);
    }
}

impl Recorder {
    fn got(&self) -> Vec<u32> {
        self.got.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }
    fn completed(&self) -> bool {
        self.completed.load(Ordering::SeqCst)
    }
}

fn cluster_bus(cluster: &RedisCluster, prefix: &str) -> Bus<u32> {
    block_on(Bus::redis(bus_config(&cluster.url(), prefix))).expect("the cluster bus connects")
}

/// Topic names, two per master, and the master serving each.
fn topics_on_every_shard(cluster: &RedisCluster, prefix: &str) -> Vec<(String, usize)> {
    let mut per_master = [0usize; 3];
    let mut topics = Vec::new();
    for i in 0..1000 {
        let topic = format!("topic-{i}");
        let owner = cluster.owner(cluster.keyslot(&format!("{prefix}{topic}")));
        if per_master[owner] < 2 {
            per_master[owner] += 1;
            topics.push((topic, owner));
        }
        if per_master.iter().all(|&n| n == 2) {
            return topics;
        }
    }
    panic!("no two topics per master among 1000 names")
}

/// The `SPUBLISH` calls master `i` has served (`INFO commandstats`; asked
/// again if the query itself fails on a loaded machine).
fn spublished(cluster: &RedisCluster, i: usize) -> u64 {
    let mut calls = None;
    let answered = wait_until(Duration::from_secs(10), || {
        let url = format!("redis://127.0.0.1:{}", cluster.nodes[i].port);
        calls = redis::Client::open(url)
            .and_then(|c| c.get_connection_with_timeout(Duration::from_secs(2)))
            .and_then(|mut con| {
                redis::cmd("INFO")
                    .arg("commandstats")
                    .query::<String>(&mut con)
            })
            .ok()
            .map(|stats| {
                stats
                    .lines()
                    .find_map(|l| l.strip_prefix("cmdstat_spublish:calls="))
                    .and_then(|rest| rest.split(',').next())
                    .and_then(|n| n.parse().ok())
                    .unwrap_or(0)
            });
        calls.is_some()
    });
    assert!(answered, "INFO commandstats on master {i}");
    calls.unwrap_or_default()
}

fn wait_shard_channels(cluster: &RedisCluster, want: &[BTreeSet<String>]) {
    let ok = wait_until(Duration::from_secs(10), || {
        (0..3).all(|i| {
            cluster
                .shard_channels(i)
                .into_iter()
                .collect::<BTreeSet<_>>()
                == want[i]
        })
    });
    let seen: Vec<Vec<String>> = (0..3).map(|i| cluster.shard_channels(i)).collect();
    assert!(
        ok,
        "each master has exactly its topics' shard channels: want {want:?}, see {seen:?}"
    );
}

#[test]
fn events_cross_nodes_each_topic_only_through_its_shard() {
    let cluster = RedisCluster::start();
    let prefix = "t-shards:";
    let topics = topics_on_every_shard(&cluster, prefix);
    let buses: Vec<Bus<u32>> = (0..3).map(|_| cluster_bus(&cluster, prefix)).collect();
    for bus in &buses {
        assert_eq!(bus.health(), BusHealth::Connected);
    }
    // Nodes 1 and 2 listen on every topic; node 0 publishes.
    let mut recorders = Vec::new();
    let mut subs = Vec::new();
    for bus in &buses[1..] {
        for (topic, _) in &topics {
            let r = Arc::new(Recorder::default());
            subs.push(bus.subscribe(topic.clone(), Inbox::from_sink(r.clone())));
            recorders.push((topic.clone(), r));
        }
    }
    let mut want = vec![BTreeSet::new(); 3];
    for (topic, owner) in &topics {
        want[*owner].insert(format!("{prefix}{topic}"));
    }
    wait_shard_channels(&cluster, &want);
    for i in 0..3 {
        // Asked again only if the query fails (a loaded machine): any answer
        // but the empty list fails.
        let mut plain = None;
        wait_until(Duration::from_secs(10), || {
            plain = cluster.nodes[i].command(&["PUBSUB", "CHANNELS"]);
            plain.is_some()
        });
        assert_eq!(
            plain.as_deref(),
            Some("*0\r\n"),
            "no plain SUBSCRIBE on master {i}"
        );
    }
    let before: Vec<u64> = (0..3).map(|i| spublished(&cluster, i)).collect();
    const N: u32 = 50;
    for seq in 0..N {
        for (topic, _) in &topics {
            buses[0].try_publish(topic, seq).expect("published");
        }
    }
    let all: Vec<u32> = (0..N).collect();
    assert!(
        wait_until(Duration::from_secs(10), || recorders
            .iter()
            .all(|(_, r)| r.got().len() >= N as usize)),
        "every listener got every event"
    );
    for (topic, r) in &recorders {
        assert_eq!(r.got(), all, "{topic}: once each, in publish order");
    }
    // Each master served the SPUBLISHes of its own topics only (the node
    // pipelines them, but each is one call): 2 topics × N per master.
    for (i, before) in before.iter().enumerate() {
        let served = spublished(&cluster, i) - before;
        assert_eq!(served, 2 * u64::from(N), "SPUBLISH calls on master {i}");
    }
    drop(subs);
    wait_shard_channels(
        &cluster,
        &[BTreeSet::new(), BTreeSet::new(), BTreeSet::new()],
    );
}

#[test]
fn losing_a_master_completes_only_its_topics_streams_and_heals() {
    let mut cluster = RedisCluster::start();
    let prefix = "t-loss:";
    let topics = topics_on_every_shard(&cluster, prefix);
    let a = cluster_bus(&cluster, prefix);
    let b = cluster_bus(&cluster, prefix);
    let listen = |bus: &Bus<u32>| {
        topics
            .iter()
            .map(|(topic, owner)| {
                let r = Arc::new(Recorder::default());
                let sub = bus.subscribe(topic.clone(), Inbox::from_sink(r.clone()));
                (topic.clone(), *owner, r, sub)
            })
            .collect::<Vec<_>>()
    };
    let streams = listen(&b);
    let mut want = vec![BTreeSet::new(); 3];
    for (topic, owner) in &topics {
        want[*owner].insert(format!("{prefix}{topic}"));
    }
    wait_shard_channels(&cluster, &want);

    let lost = 1;
    cluster.nodes[lost].kill();
    assert!(
        wait_until(Duration::from_secs(10), || streams
            .iter()
            .filter(|(_, owner, _, _)| *owner == lost)
            .all(|(_, _, r, _)| r.completed())),
        "the streams of the lost master's topics complete"
    );
    for (topic, owner, r, _) in &streams {
        if *owner != lost {
            assert!(!r.completed(), "{topic} (master {owner}) keeps going");
        }
    }
    // The other shards still carry events; the lost one's topics refuse
    // publishes once the publishing node has noticed.
    for (topic, owner, _, _) in &streams {
        if *owner != lost {
            a.try_publish(topic, 7).expect("published");
        }
    }
    assert!(
        wait_until(Duration::from_secs(10), || streams
            .iter()
            .filter(|(_, owner, _, _)| *owner != lost)
            .all(|(_, _, r, _)| r.got() == [7])),
        "the other masters' topics still get events"
    );
    let (lost_topic, _) = topics
        .iter()
        .find(|(_, owner)| *owner == lost)
        .expect("a topic on the lost master");
    assert!(
        wait_until(Duration::from_secs(10), || matches!(
            a.try_publish(lost_topic, 1),
            Err((_, BusError::Unavailable { .. }))
        )),
        "a publish to the lost master's topic fails"
    );

    // Back: the node reaches it again (its slots are its own again).
    cluster.nodes[lost].restart();
    assert!(
        cluster.wait_ok(Duration::from_secs(20)),
        "the cluster is whole again"
    );
    let again = listen(&b);
    wait_shard_channels(&cluster, &want);
    assert!(
        wait_until(Duration::from_secs(10), || {
            let _ = a.try_publish(lost_topic, 9);
            again
                .iter()
                .find(|(t, _, _, _)| t == lost_topic)
                .is_some_and(|(_, _, r, _)| r.got().contains(&9))
        }),
        "the healed master's topic carries events again"
    );
    drop(streams);
}

#[test]
fn records_claims_and_the_notes_script_work_on_a_cluster() {
    let cluster = RedisCluster::start();
    let prefix = "t-keys:";
    let a = cluster_bus(&cluster, prefix);
    let b = cluster_bus(&cluster, prefix);
    let (ka, kb) = (a.once().expect("keys"), b.once().expect("keys"));
    let later = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as u64 + 60_000)
        .unwrap_or(u64::MAX);
    block_on(async {
        // Claims on keys of every master: the first wins, on any node.
        for i in 0..30 {
            let name = format!("spent:{i}");
            assert!(ka.claim(&name, later).await.expect("claim"), "{name}");
            assert!(!kb.claim(&name, later).await.expect("claim"), "{name}");
        }
        // Revisioned records.
        assert!(
            ka.put_newer("task:x", 2, br#"{"rev":2,"v":1}"#.to_vec(), later)
                .await
                .expect("put")
        );
        assert!(
            !kb.put_newer("task:x", 1, br#"{"rev":1,"v":0}"#.to_vec(), later)
                .await
                .expect("put")
        );
        assert_eq!(
            kb.get("task:x").await.expect("get").as_deref(),
            Some(&br#"{"rev":2,"v":1}"#[..])
        );
        kb.put("task-node:n", b"1", later).await.expect("put");
        assert_eq!(
            ka.get("task-node:n").await.expect("get").as_deref(),
            Some(&b"1"[..])
        );
        // The notes' add script names two keys: one slot, so it runs.
        let (na, nb) = (Notes::shared(ka.clone()), Notes::shared(kb.clone()));
        let uri = na.add("hello").await.expect("a note added on a cluster");
        assert_eq!(nb.get(&uri).await.expect("get").as_deref(), Some("hello"));
        assert!(nb.update(&uri, "bye").await.expect("update"));
        assert_eq!(
            na.all().await.expect("all"),
            vec![(uri.clone(), "bye".into())]
        );
        assert!(na.delete(&uri).await.expect("delete"));
    });
}

/// `genmcp serve --bus <cluster url>` (the notes demo, unauthenticated bus,
/// default prefix), killed on drop; its address.
struct BinaryNode {
    child: std::process::Child,
    addr: std::net::SocketAddr,
}

impl BinaryNode {
    fn start(url: &str) -> BinaryNode {
        use std::io::{BufRead, BufReader};
        let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_genmcp"))
            .args(["--log-format", "json", "serve", "--port", "0", "--bus", url])
            .env("RUST_LOG", "genmcp=info")
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("genmcp starts");
        let stderr = child.stderr.take().expect("stderr");
        let (tx, rx) = std::sync::mpsc::channel();
        let log = Arc::new(Mutex::new(Vec::new()));
        let lines = log.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines() {
                let Ok(line) = line else { break };
                let v: serde_json::Value = serde_json::from_str(&line).unwrap_or_default();
                if v["fields"]["message"] == "genmcp listening" {
                    let _ = tx.send(v["fields"]["addr"].as_str().unwrap_or("").to_owned());
                }
                lines.lock().unwrap_or_else(|p| p.into_inner()).push(line);
            }
        });
        let addr = match rx.recv_timeout(Duration::from_secs(20)) {
            Ok(addr) => addr.parse().expect("an address"),
            Err(_) => {
                let _ = child.kill();
                let status = child.wait();
                panic!(
                    "no listening line from genmcp serve ({status:?}); its log: {:?}",
                    log.lock().unwrap_or_else(|p| p.into_inner())
                )
            }
        };
        BinaryNode { child, addr }
    }
}

impl Drop for BinaryNode {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn genmcp_serve_nodes_share_events_and_tasks_on_a_cluster() {
    use common::{call, headers, listen, post, request};
    let meta = || common::tasks::meta(true);
    use serde_json::json;
    let cluster = RedisCluster::start();
    let a = BinaryNode::start(&cluster.url());
    let b = BinaryNode::start(&cluster.url());
    let mut stream = listen(b.addr, json!(1), json!({"toolsListChanged": true}));
    let ack = stream.next_message().expect("acknowledged");
    assert_eq!(ack["method"], "notifications/subscriptions/acknowledged");
    let channel = format!("genmcp:{}", genmcp_cli::demo::topics::TOOLS);
    let owner = cluster.owner(cluster.keyslot(&channel));
    assert!(
        wait_until(Duration::from_secs(10), || cluster
            .shard_channels(owner)
            .contains(&channel)),
        "node B subscribes {channel} on its master"
    );
    let toggled = call(
        a.addr,
        json!(2),
        "tools/call",
        json!({"name": "toggle_extra_tool", "arguments": {}}),
    );
    assert_eq!(toggled.status, 200);
    assert_eq!(
        toggled.json()["result"]["isError"],
        json!(null),
        "{:?}",
        toggled.json()
    );
    stream.set_timeout(Duration::from_secs(5));
    let event = stream.next_message().expect("the event from node A");
    assert_eq!(
        event["method"], "notifications/tools/list_changed",
        "{event}"
    );

    // A task made on A is read on B (its record in the cluster).
    let created = post(
        a.addr,
        &headers("tools/call", Some("export_notes")),
        &request(
            json!(3),
            "tools/call",
            json!({"name": "export_notes", "arguments": {}, "_meta": meta()}),
        ),
    )
    .json();
    let id = created["result"]["taskId"]
        .as_str()
        .unwrap_or_else(|| panic!("a task: {created}"))
        .to_owned();
    let read = post(
        b.addr,
        &headers("tasks/get", Some(&id)),
        &request(
            json!(4),
            "tasks/get",
            json!({"taskId": id, "_meta": meta()}),
        ),
    )
    .json();
    assert_eq!(read["result"]["taskId"], id.as_str(), "{read}");
}

#[test]
fn a_hung_master_ends_only_its_topics_streams_while_the_node_retries_it() {
    let cluster = RedisCluster::start();
    let prefix = "t-hung:";
    let topics = topics_on_every_shard(&cluster, prefix);
    // A master that stops answering is lost after `command_timeout`; reaching
    // it again then waits `connect_timeout` per attempt, which must not hold
    // up the other shards (their keep-alives run every 50 ms). Bounds with
    // room for a loaded machine: a healthy master answering late must not
    // be taken for a hung one.
    let config = || {
        let mut c = bus_config(&cluster.url(), prefix);
        c.command_timeout = Duration::from_secs(2);
        c.connect_timeout = Duration::from_secs(10);
        c
    };
    let a: Bus<u32> = block_on(Bus::redis(config())).expect("the bus connects");
    let b: Bus<u32> = block_on(Bus::redis(config())).expect("the bus connects");
    let streams: Vec<_> = topics
        .iter()
        .map(|(topic, owner)| {
            let r = Arc::new(Recorder::default());
            let sub = b.subscribe(topic.clone(), Inbox::from_sink(r.clone()));
            (topic.clone(), *owner, r, sub)
        })
        .collect();
    let mut want = vec![BTreeSet::new(); 3];
    for (topic, owner) in &topics {
        want[*owner].insert(format!("{prefix}{topic}"));
    }
    wait_shard_channels(&cluster, &want);
    let hung = 2;
    cluster.nodes[hung].signal("-STOP");
    let lost = wait_until(Duration::from_secs(20), || {
        streams
            .iter()
            .filter(|(_, owner, _, _)| *owner == hung)
            .all(|(_, _, r, _)| r.completed())
    });
    // Meanwhile the node keeps trying the hung master (each attempt waits
    // `connect_timeout`, 10 s): events on the other shards still arrive
    // within 3 s, not after the attempt.
    let mut seq = 0;
    let mut slow = Vec::new();
    for round in 0..10 {
        for (topic, owner, r, _) in &streams {
            if *owner == hung {
                continue;
            }
            seq += 1;
            let sent = std::time::Instant::now();
            let _ = a.try_publish(topic, seq);
            if !wait_until(Duration::from_secs(3), || r.got().contains(&seq)) {
                slow.push((round, topic.clone(), sent.elapsed()));
            }
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    let others_flow = slow.is_empty();
    let survivors: Vec<(String, bool)> = streams
        .iter()
        .filter(|(_, owner, _, _)| *owner != hung)
        .map(|(t, _, r, _)| (t.clone(), r.completed()))
        .collect();
    cluster.nodes[hung].signal("-CONT");
    assert!(lost, "the hung master's topics' streams complete");
    assert!(
        survivors.iter().all(|(_, completed)| !completed),
        "the other masters' streams keep going: {survivors:?}"
    );
    assert!(
        others_flow,
        "the other masters' topics carry events within 3 s: late {slow:?}"
    );
}

#[test]
fn with_a_key_only_the_nodes_sharing_it_reach_each_other_on_a_cluster() {
    use genmcp::pubsub::redis::{DropReason, dropped_messages};
    let forged = || {
        dropped_messages()
            .into_iter()
            .find(|(r, _)| *r == DropReason::Forged)
            .map_or(0, |(_, n)| n)
    };
    let cluster = RedisCluster::start();
    let prefix = "t-keyed:";
    let keyed = |key: &[u8; 32]| -> Bus<u32> {
        block_on(Bus::redis(bus_config(&cluster.url(), prefix).key(key)))
            .expect("the cluster bus connects")
    };
    let (a, b, stranger) = (keyed(&[1; 32]), keyed(&[1; 32]), keyed(&[2; 32]));
    let topics = topics_on_every_shard(&cluster, prefix);
    let streams: Vec<_> = topics
        .iter()
        .map(|(topic, _)| {
            let r = Arc::new(Recorder::default());
            let sub = b.subscribe(topic.clone(), Inbox::from_sink(r.clone()));
            (topic.clone(), r, sub)
        })
        .collect();
    let mut want = vec![BTreeSet::new(); 3];
    for (topic, owner) in &topics {
        want[*owner].insert(format!("{prefix}{topic}"));
    }
    wait_shard_channels(&cluster, &want);
    let forged_before = forged();
    for (topic, _, _) in &streams {
        stranger.try_publish(topic, 666).expect("published");
        for seq in 0..5 {
            a.try_publish(topic, seq).expect("published");
        }
    }
    assert!(
        wait_until(Duration::from_secs(10), || streams
            .iter()
            .all(|(_, r, _)| r.got().len() >= 5)),
        "the key's nodes reach each other on every shard"
    );
    assert!(
        wait_until(Duration::from_secs(5), || forged() >= forged_before + 6),
        "the other key's messages are dropped as forged"
    );
    for (topic, r, _) in &streams {
        assert_eq!(r.got(), [0, 1, 2, 3, 4], "{topic}");
    }
}
