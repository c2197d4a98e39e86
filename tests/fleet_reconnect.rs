//! The subscriptions a node depends on survive a lost Redis session: two
//! nodes on one real `redis-server`, every subscription connection cut
//! (`CLIENT KILL TYPE pubsub`, what a restart, a failover or a dropped
//! connection does), and after the reconnection a `tasks/cancel` forwarded
//! to the task's node still cancels it, a 2025 `resources/subscribe`
//! forwarded to the GET stream's node still takes effect, and a listen
//! watching another node's task whose end it missed during the outage reads
//! the terminal status.

mod common;

use common::fleet_notes::{add_note, message};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use common::legacy::reader;
use common::redis_server::{RedisServer, block_on, bus_config, redis_bus};
use common::tasks::{self, as_principal, call_as, start_task};
use common::{Exchange, headers, request, wait_until};
use genmcp::mux::SharedNotification;
use genmcp::prelude::*;
use genmcp_cli::demo;
use serde_json::{Value, json};

type Events = Bus<SharedNotification>;

fn suite(bus: Events) -> Suite {
    let catalog = Catalog::new();
    catalog.add_tool(
        ToolBuilder::new("long")
            .description("runs a minute unless cancelled")
            .task_support(TaskSupport::Required)
            .handler(|call| async move {
                let Some(task) = call.task() else {
                    return Ok(CallToolResult::text("no task").into());
                };
                tokio::select! {
                    _ = tokio::time::sleep(Duration::from_secs(60)) => {}
                    _ = task.cancelled() => {}
                }
                Ok(CallToolResult::text("stopped").into())
            }),
    );
    Suite::builder(Implementation::new("reconnect-tasks", "1"))
        .catalog(catalog)
        .tasks(TaskConfig::default())
        .shared_tasks(&bus)
        .build()
}

fn task_node(bus: &Events) -> ServerThread {
    let bus = bus.clone();
    ServerThread::spawn(move || suite(bus), tasks::bearer_config()).expect("node starts")
}

fn status(srv: &ServerThread, id: &str) -> Value {
    call_as(srv.addr, "alice", "tasks/get", id, json!({"taskId": id}))["result"]["status"].clone()
}

fn wait_status(srv: &ServerThread, id: &str, want: &str) -> bool {
    wait_until(Duration::from_secs(10), || status(srv, id) == want)
}

/// Cuts every subscription connection and waits until each of `buses` that
/// had one (a bus subscribed to nothing has none in subscribe mode) has
/// subscribed its topics again (a new epoch).
fn cut_and_reconnect(redis: &RedisServer, buses: &[&Events]) {
    let buses: Vec<&&Events> = buses.iter().filter(|b| b.topic_count() > 0).collect();
    assert!(!buses.is_empty(), "a node listens to something");
    let epochs: Vec<u64> = buses.iter().map(|b| b.epoch()).collect();
    let killed = redis.command(&["CLIENT", "KILL", "TYPE", "pubsub"]);
    assert!(
        killed.as_deref().is_some_and(|r| r.starts_with(':')),
        "{killed:?}"
    );
    for (bus, epoch) in buses.iter().zip(epochs) {
        assert!(
            wait_until(Duration::from_secs(15), || bus.epoch() > epoch),
            "a bus never reconnected"
        );
    }
}

#[test]
fn a_cancel_forwarded_after_a_cut_still_cancels_the_task() {
    let redis = RedisServer::start();
    let prefix = "t-recon-cancel:";
    let (bus_a, bus_b): (Events, Events) = (
        redis_bus(&redis.url(), prefix),
        redis_bus(&redis.url(), prefix),
    );
    let a = task_node(&bus_a);
    let b = task_node(&bus_b);
    let id = start_task(a.addr, "alice", "long");
    assert!(wait_status(&b, &id, "working"));

    cut_and_reconnect(&redis, &[&bus_a, &bus_b]);

    // Cancelled on B: A hears its control topic again and cancels it.
    let answer = call_as(b.addr, "alice", "tasks/cancel", &id, json!({"taskId": id}));
    assert!(answer.get("result").is_some(), "{answer}");
    assert!(
        wait_status(&a, &id, "cancelled"),
        "the task still runs on A: {}",
        status(&a, &id)
    );
    assert!(wait_status(&b, &id, "cancelled"));
}

/// A listen on `srv` (as alice) watching task `id`.
fn listen(srv: &ServerThread, id: &str) -> Exchange {
    let body = request(
        json!("w"),
        "subscriptions/listen",
        json!({"notifications": {"taskIds": [id]}, "_meta": tasks::meta(true)}),
    );
    let h = as_principal(headers("subscriptions/listen", None), "alice");
    let stream = Exchange::open(srv.addr, &h, body.to_string().as_bytes());
    stream.set_timeout(Duration::from_secs(20));
    stream
}

#[test]
fn a_watch_whose_task_ended_during_an_outage_reads_the_end_after_it() {
    let redis = RedisServer::start();
    let prefix = "t-recon-watch:";
    let bus_a: Events = redis_bus(&redis.url(), prefix);
    // B comes back slowly: the task ends while A is connected and B is not.
    let mut slow = bus_config(&redis.url(), prefix);
    slow.reconnect_min = Duration::from_secs(8);
    slow.reconnect_max = Duration::from_secs(10);
    let bus_b: Events = block_on(Bus::redis(slow)).expect("the bus connects");
    let a = task_node(&bus_a);
    let b = task_node(&bus_b);
    let id = start_task(a.addr, "alice", "long");
    assert!(wait_status(&b, &id, "working"));

    let watch = reader(listen(&b, &id));
    let next = |within: Duration| watch.recv_timeout(within).ok().flatten();
    let ack = next(Duration::from_secs(10)).expect("ack");
    assert!(
        ack["result"].is_object() || ack["method"].is_string(),
        "{ack}"
    );
    let first = next(Duration::from_secs(10)).expect("its state");
    assert_eq!(first["params"]["status"], "working", "{first}");
    // B's status topic is on Redis before the cut.
    let channel = format!("{prefix}tasks/{id}");
    assert!(wait_until(Duration::from_secs(5), || redis
        .subscribers(&channel)
        == 1));

    let (epoch_a, epoch_b) = (bus_a.epoch(), bus_b.epoch());
    redis.command(&["CLIENT", "KILL", "TYPE", "pubsub"]);
    assert!(wait_until(Duration::from_secs(10), || bus_a.epoch() > epoch_a));
    assert_eq!(
        bus_b.health(),
        genmcp::pubsub::BusHealth::Disconnected,
        "B is still away (8 s back-off)"
    );
    // Ended on A while B cannot hear it.
    let answer = call_as(a.addr, "alice", "tasks/cancel", &id, json!({"taskId": id}));
    assert!(answer.get("result").is_some(), "{answer}");
    assert!(wait_status(&a, &id, "cancelled"));
    assert!(bus_b.epoch() == epoch_b, "B was away while the task ended");

    // B reconnects; its watch reads the record again and hears the end.
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let m = next(deadline.saturating_duration_since(Instant::now()))
            .expect("the watch stays at working: the end was never heard");
        if m["params"]["status"] == "cancelled" {
            break;
        }
        assert_eq!(m["params"]["status"], "working", "{m}");
    }
}

/// Whether `notifications/resources/updated` of `uri` arrives within
/// `within`; `None` if the stream ended first.
fn updated_within(
    get: &mpsc::Receiver<Option<Value>>,
    uri: &str,
    within: Duration,
) -> Option<bool> {
    let deadline = Instant::now() + within;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        match get.recv_timeout(left) {
            Ok(Some(m)) => {
                if m["method"] == "notifications/resources/updated" && m["params"]["uri"] == uri {
                    return Some(true);
                }
            }
            Ok(None) => return None,
            Err(_) => return Some(false),
        }
    }
}

fn notes_node(bus: &Events) -> ServerThread {
    let bus = bus.clone();
    let mut config = common::config();
    config.workers = 2;
    config.keep_alive = Duration::from_millis(100);
    let key = genmcp::suite::secret::parse_secret(&"5a".repeat(32)).expect("key");
    ServerThread::spawn(move || demo::suite_with(bus, Some(key)).0, config).expect("node starts")
}

#[test]
fn a_subscribe_forwarded_after_a_cut_still_reaches_the_get_stream() {
    let redis = RedisServer::start();
    let prefix = "t-recon-sess:";
    let (bus_a, bus_b): (Events, Events) = (
        redis_bus(&redis.url(), prefix),
        redis_bus(&redis.url(), prefix),
    );
    let a = notes_node(&bus_a);
    let b = notes_node(&bus_b);
    let session = common::legacy::initialize(a.addr);
    let uri = add_note(a.addr, &session, json!({"text": "first"}));
    // A holds the GET stream (and so hears its control topic).
    let get = common::legacy::get(a.addr, Some(&session));
    assert_eq!(get.status, 200);
    let mut get = reader(get);

    cut_and_reconnect(&redis, &[&bus_a, &bus_b]);
    // A GET stream that depended on the lost session ended: the client
    // opens it again (on A).
    if updated_within(&get, &uri, Duration::from_millis(300)).is_none() {
        let again = wait_until(Duration::from_secs(10), || {
            let g = common::legacy::get(a.addr, Some(&session));
            if g.status == 200 {
                get = reader(g);
                true
            } else {
                g.disconnect();
                false
            }
        });
        assert!(again, "the GET stream could not be opened again on A");
    }

    // Subscribed on B, the node without the stream: forwarded to A.
    let r = common::legacy::request(
        b.addr,
        &session,
        json!(1),
        "resources/subscribe",
        json!({"uri": uri}),
    );
    let answer = message(&r);
    assert!(answer.get("result").is_some(), "{answer}");
    add_note(a.addr, &session, json!({"uri": uri, "text": "changed"}));
    assert_eq!(
        updated_within(&get, &uri, Duration::from_secs(5)),
        Some(true),
        "the subscribe forwarded from B never took effect"
    );
}
