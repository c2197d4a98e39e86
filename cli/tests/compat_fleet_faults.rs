//! 2025-era sessions shared by the nodes of one Redis bus, under faults: a
//! holder node paused while another node forwards a change to it, a GET
//! stream restarted before its session is deleted behind its back, a Redis
//! outage longer than the old release retries, racing subscribe and
//! unsubscribe, and the server-to-client requests one principal may keep
//! waiting.

#[path = "../../tests/common/mod.rs"]
mod common;

use common::fleet_notes::{add_note, message};
use std::net::SocketAddr;
use std::sync::{Arc, mpsc};
use std::time::{Duration, Instant};

use common::Exchange;
use common::legacy::{self, reader, resuming_reader};
use common::redis_server::{RedisServer, block_on, bus_config};
use common::serve_child::ServeNode;
use genmcp::http::{CompatConfig, ServerThread};
use genmcp::mux::SharedNotification;
use genmcp::prelude::*;
use serde_json::{Value, json};

type Events = Bus<SharedNotification>;

const KEY_HEX: &str = "5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a";

fn key() -> [u8; 32] {
    genmcp::suite::secret::parse_secret(KEY_HEX).expect("key")
}

fn config(compat: Option<CompatConfig>) -> genmcp::http::HttpConfig {
    let mut config = common::config();
    config.workers = 2;
    config.keep_alive = Duration::from_millis(100);
    if let Some(c) = compat {
        config.compat = Some(c);
    }
    config
}

/// Whether the GET stream ends within `within` (its other messages skipped).
fn ends_within(get: &mpsc::Receiver<Option<Value>>, within: Duration) -> bool {
    let deadline = Instant::now() + within;
    loop {
        match get.recv_timeout(deadline.saturating_duration_since(Instant::now())) {
            Ok(None) => return true,
            Ok(Some(_)) => continue,
            Err(_) => return false,
        }
    }
}

/// How many `notifications/resources/updated` of `uri` arrive within
/// `within`; panics if the stream ends.
fn updates_within(get: &mpsc::Receiver<Option<Value>>, uri: &str, within: Duration) -> usize {
    count_updates(get, uri, within, None)
}

/// The updates of `uri` heard: the first waited for up to 10 s (a loaded
/// machine), then any more for 1 s after it.
fn updates_heard(get: &mpsc::Receiver<Option<Value>>, uri: &str) -> usize {
    count_updates(
        get,
        uri,
        Duration::from_secs(10),
        Some(Duration::from_secs(1)),
    )
}

/// The updates of `uri` until `within` has passed, or `then` after the
/// first when given.
fn count_updates(
    get: &mpsc::Receiver<Option<Value>>,
    uri: &str,
    within: Duration,
    then: Option<Duration>,
) -> usize {
    let mut deadline = Instant::now() + within;
    let mut n = 0;
    loop {
        match get.recv_timeout(deadline.saturating_duration_since(Instant::now())) {
            Ok(Some(m)) => {
                if m["method"] == "notifications/resources/updated" && m["params"]["uri"] == uri {
                    n += 1;
                    if let (1, Some(then)) = (n, then) {
                        deadline = Instant::now() + then;
                    }
                }
            }
            Ok(None) => panic!("the GET stream ended"),
            Err(_) => return n,
        }
    }
}

/// A `genmcp serve --bus` process (the notes demo), stopped and continued
/// with signals; killed when dropped.
struct Node;

impl Node {
    fn start(url: &str) -> ServeNode {
        ServeNode::start(
            &["--bus", url, "--keep-alive", "1"],
            &[("GENMCP_KEY", KEY_HEX)],
        )
    }
}

/// A change forwarded to a holder node that is paused (`SIGSTOP`) is not
/// answered as a success, and it does not take effect when the holder wakes;
/// a DELETE the paused holder could not confirm is not a success either.
#[test]
fn a_change_the_paused_holder_never_applied_is_an_error_and_stays_unapplied() {
    let redis = RedisServer::start();
    let a = Node::start(&redis.url());
    let b = Node::start(&redis.url());
    let session = legacy::initialize(a.addr);
    let uri = add_note(a.addr, &session, json!({"text": "first"}));
    let get = legacy::get(a.addr, Some(&session));
    assert_eq!(get.status, 200);
    // Paused past the Redis command timeout, the holder's reader may end
    // its body with a retry hint: the client resumes, nothing is lost.
    let get = resuming_reader(a.addr, &session, get);

    // The holder is paused: the subscribe on B cannot be applied.
    a.signal("-STOP");
    let r = legacy::request(
        b.addr,
        &session,
        json!(1),
        "resources/subscribe",
        json!({"uri": uri}),
    );
    let m = message(&r);
    a.signal("-CONT");
    assert!(m.get("result").is_none(), "answered as applied: {m}");
    assert_eq!(m["error"]["code"], -32603, "{m}");
    assert!(
        m["error"]["message"]
            .as_str()
            .is_some_and(|s| s.contains("retry")),
        "{m}"
    );
    // Awake again, the holder does not apply it late: an update is unheard.
    std::thread::sleep(Duration::from_millis(500));
    add_note(b.addr, &session, json!({"uri": uri, "text": "changed"}));
    assert_eq!(
        updates_within(&get, &uri, Duration::from_millis(1500)),
        0,
        "a refused subscribe took effect later"
    );
    // Retried with the holder awake: applied and confirmed.
    let r = legacy::request(
        b.addr,
        &session,
        json!(2),
        "resources/subscribe",
        json!({"uri": uri}),
    );
    assert_eq!(message(&r)["result"], json!({}), "{}", message(&r));
    add_note(b.addr, &session, json!({"uri": uri, "text": "again"}));
    assert_eq!(updates_heard(&get, &uri), 1);

    // An unsubscribe on B while the holder is paused: an error, and the
    // stream keeps the URI (as the session's set in Redis does).
    a.signal("-STOP");
    let r = legacy::request(
        b.addr,
        &session,
        json!(3),
        "resources/unsubscribe",
        json!({"uri": uri}),
    );
    let m = message(&r);
    a.signal("-CONT");
    assert_eq!(m["error"]["code"], -32603, "{m}");
    std::thread::sleep(Duration::from_millis(500));
    add_note(b.addr, &session, json!({"uri": uri, "text": "still"}));
    assert_eq!(updates_heard(&get, &uri), 1);
    // Retried with the holder awake: applied.
    let r = legacy::request(
        b.addr,
        &session,
        json!(4),
        "resources/unsubscribe",
        json!({"uri": uri}),
    );
    assert_eq!(message(&r)["result"], json!({}), "{}", message(&r));
    add_note(b.addr, &session, json!({"uri": uri, "text": "unheard"}));
    assert_eq!(updates_within(&get, &uri, Duration::from_millis(1500)), 0);

    // A DELETE on B while the holder is paused: not a success.
    a.signal("-STOP");
    let deleted = legacy::delete(b.addr, &session);
    a.signal("-CONT");
    assert_ne!(deleted.status, 200, "a DELETE the holder never confirmed");
    assert_eq!(
        deleted.status,
        503,
        "{}",
        String::from_utf8_lossy(&deleted.body)
    );
    assert!(String::from_utf8_lossy(&deleted.body).contains("retry"));
    // The session is deleted all the same, and its stream ends.
    assert!(ends_within(&get, Duration::from_secs(10)));
    let r = legacy::request(b.addr, &session, json!(3), "ping", json!({}));
    assert_eq!(r.status, 404);
}

/// A node serving a probe handler (each 2025 subscribe restarts its stream
/// actor) with sessions shared on `events`.
fn probe_node(events: &Events, record: Arc<common::probe::Record>) -> ServerThread {
    use common::probe::{Mode, Probe};
    let events = events.clone();
    ServerThread::spawn(
        move || {
            Suite::builder(Implementation::new("probe", "1"))
                .secret(key())
                .subscriptions(Probe {
                    bus: Bus::new(),
                    mode: Mode::Accept,
                    caps: SubscriptionCapabilities::none()
                        .with_tools_list_changed(true)
                        .with_resources_updated(true),
                    record: record.clone(),
                })
                .shared_tasks(&events)
                .build()
        },
        config(None),
    )
    .expect("node starts")
}

fn events(redis: &RedisServer, prefix: &str) -> Events {
    block_on(Bus::redis(bus_config(&redis.url(), prefix))).expect("the bus connects")
}

/// The session's hash in Redis (whatever the key layout, its name holds the
/// session id and it is the one hash among its keys).
fn session_hash(redis: &RedisServer, sid: &str) -> String {
    let keys = redis
        .command(&["KEYS", &format!("*{sid}*")])
        .expect("KEYS answers");
    keys.lines()
        .filter(|l| l.contains(sid))
        .find(|k| {
            redis
                .command(&["TYPE", k])
                .is_some_and(|t| t.starts_with("+hash"))
        })
        .expect("the session's hash")
        .to_owned()
}

/// The 5 s GET watcher acts on the stream actor that runs now: after a
/// subscribe restarted it, a DELETE whose control message was lost still
/// ends the GET stream.
#[test]
fn the_get_watcher_ends_a_restarted_stream_of_a_deleted_session() {
    let redis = RedisServer::start();
    let bus = events(&redis, "t-faults-watch:");
    let record = Arc::new(common::probe::Record::default());
    let node = probe_node(&bus, record.clone());
    let session = legacy::initialize(node.addr);
    let get = legacy::get(node.addr, Some(&session));
    assert_eq!(get.status, 200);
    let get = reader(get);
    assert!(common::wait_until(Duration::from_secs(10), || {
        *record.subscribes.lock().unwrap() >= 1
    }));
    // The probe takes no URI in place: its stream actor is restarted.
    let r = legacy::request(
        node.addr,
        &session,
        json!(1),
        "resources/subscribe",
        json!({"uri": "a://1"}),
    );
    assert_eq!(message(&r)["result"], json!({}), "{}", message(&r));
    assert!(common::wait_until(Duration::from_secs(10), || {
        *record.subscribes.lock().unwrap() >= 2
    }));
    // Deleted behind the node's back (as when the control message is lost).
    let hash = session_hash(&redis, &legacy::sid_of(&session));
    let reply = redis.command(&["HSET", &hash, "d", "1"]);
    assert!(reply.is_some_and(|r| r.starts_with(':')), "HSET {hash}");
    assert!(
        ends_within(&get, Duration::from_secs(12)),
        "the restarted GET stream of a deleted session kept running"
    );
}

/// A notes node whose tasks lease outlives the test (a lease that lapses
/// would let another node take the GET stream over anyway) and whose Redis
/// commands give up quickly.
fn long_lease_node(redis: &RedisServer, prefix: &str) -> ServerThread {
    let mut c = bus_config(&redis.url(), prefix);
    c.command_timeout = Duration::from_millis(300);
    let bus: Events = block_on(Bus::redis(c)).expect("the bus connects");
    ServerThread::spawn(
        move || {
            let mut tasks = TaskConfig::default();
            tasks.lease = Duration::from_secs(120);
            genmcp_cli::fixtures::suite_for_node_with_tasks(Some(key()), None, tasks, Some(&bus))
        },
        config(None),
    )
    .expect("node starts")
}

/// After a Redis outage longer than the old retries (about 16 s), the GET
/// stream that ended during it is let go in Redis once Redis is back: another
/// node may open it.
#[test]
fn a_get_stream_that_ended_in_a_long_redis_outage_is_let_go_when_redis_is_back() {
    let redis = RedisServer::start();
    let a = long_lease_node(&redis, "t-faults-release:");
    let b = long_lease_node(&redis, "t-faults-release:");
    let session = legacy::initialize(a.addr);
    let get = legacy::get(a.addr, Some(&session));
    assert_eq!(get.status, 200);
    // Redis hangs; the stream ends (the client leaves) during the outage.
    redis.signal("-STOP");
    get.disconnect();
    std::thread::sleep(Duration::from_secs(18));
    redis.signal("-CONT");
    let mut last = 0;
    let reopened = common::wait_until(Duration::from_secs(15), || {
        let again = legacy::get(b.addr, Some(&session));
        last = again.status;
        again.disconnect();
        last == 200
    });
    assert!(
        reopened,
        "the GET stream still held after Redis came back: {last}"
    );
}

/// Racing subscribe and unsubscribe of one URI keep the principal's count
/// exact: with one URI per principal and per session, a second URI is
/// refused by the principal's bound exactly while the first is subscribed
/// (never let through to the session's own bound).
#[test]
fn racing_subscribe_and_unsubscribe_keep_the_count_exact() {
    let redis = RedisServer::start();
    let mut compat = CompatConfig::default();
    compat.max_subscribed_uris_per_principal = 1;
    let nodes: Vec<ServerThread> = (0..2)
        .map(|_| {
            let bus = events(&redis, "t-faults-count:");
            let mut c = config(Some(compat.clone()));
            c.limits.max_resource_uris = 1;
            ServerThread::spawn(
                move || {
                    genmcp_cli::fixtures::suite_for_node_with_tasks(
                        Some(key()),
                        None,
                        TaskConfig::default(),
                        Some(&bus),
                    )
                },
                c,
            )
            .expect("node starts")
        })
        .collect();
    let (a, b) = (nodes[0].addr, nodes[1].addr);
    let session = legacy::initialize(a);
    let change = |addr: SocketAddr, uri: &str, on: bool| -> Value {
        let method = if on {
            "resources/subscribe"
        } else {
            "resources/unsubscribe"
        };
        message(&legacy::request(
            addr,
            &session,
            json!(1),
            method,
            json!({"uri": uri}),
        ))
    };
    for round in 0..150 {
        assert_eq!(change(a, "note://u", true)["result"], json!({}));
        std::thread::scope(|s| {
            s.spawn(|| {
                for _ in 0..3 {
                    let _ = change(a, "note://u", true);
                }
            });
            s.spawn(|| {
                for _ in 0..3 {
                    let _ = change(b, "note://u", false);
                }
            });
        });
        // A second URI: refused by the principal's bound (429) while the
        // first is subscribed, accepted while it is not; never past the
        // principal's count to the session's bound (-32602).
        let probe = change(b, "note://v", true);
        assert_ne!(
            probe["error"]["code"], -32602,
            "round {round}: the principal's count missed a subscribed URI: {probe}"
        );
        assert_eq!(change(a, "note://v", false)["result"], json!({}));
        assert_eq!(change(a, "note://u", false)["result"], json!({}));
    }
}

/// One principal (here: one client address) keeps at most
/// `max_pending_requests_per_principal` (default 64) server-to-client
/// requests waiting at once; past it a clear error, and other requests
/// of the server are not affected.
#[test]
fn server_to_client_requests_are_bounded_per_principal() {
    let srv = ServerThread::spawn(genmcp_cli::fixtures::suite, config(None)).expect("starts");
    let init = legacy::initialize_with(srv.addr, legacy::LEGACY, json!({"elicitation": {}}));
    let session = init.header("mcp-session-id").expect("a session").to_owned();
    let ask = |id: u64| {
        let body = json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
            "params": {"name": "test_elicitation", "arguments": {"message": "Who?"}}});
        Exchange::open(
            srv.addr,
            &legacy::headers(Some(&session)),
            body.to_string().as_bytes(),
        )
    };
    let mut waiting = Vec::new();
    for id in 0..64u64 {
        let mut call = ask(id);
        let first = call.next_message().expect("a message");
        assert_eq!(first["method"], "elicitation/create", "call {id}: {first}");
        waiting.push(call);
    }
    let mut over = ask(64);
    let refused = if over.header("content-type") == Some("text/event-stream") {
        over.next_message().expect("an answer")
    } else {
        over.into_response().json()
    };
    assert_eq!(refused["id"], 64, "{refused}");
    assert_eq!(refused["error"]["code"], -32603, "{refused}");
    assert!(
        refused["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("per principal")),
        "{refused}"
    );
    drop(waiting);
}

/// A request refused by the fleet's bound counts against no owner: with one
/// session with state in the whole fleet and two per principal, a refused
/// session does not linger in its principal's count (the principal's next
/// refusal is the fleet's "Server busy", not its own 429).
#[test]
fn a_request_refused_by_the_fleets_bound_counts_against_no_owner() {
    let redis = RedisServer::start();
    let mut compat = CompatConfig::default();
    compat.max_session_states = 1;
    compat.max_session_states_per_principal = 2;
    let bus = events(&redis, "t-faults-refused:");
    let node = ServerThread::spawn(
        move || {
            genmcp_cli::fixtures::suite_for_node_with_tasks(
                Some(key()),
                None,
                TaskConfig::default(),
                Some(&bus),
            )
        },
        config(Some(compat)),
    )
    .expect("node starts");
    let sessions: Vec<String> = (0..4).map(|_| legacy::initialize(node.addr)).collect();
    let set_level = |s: &str| {
        message(&legacy::request(
            node.addr,
            s,
            json!(1),
            "logging/setLevel",
            json!({"level": "info"}),
        ))
    };
    // The fleet's one session with state: a GET stream.
    let get = legacy::get(node.addr, Some(&sessions[0]));
    assert_eq!(get.status, 200);
    let refused = set_level(&sessions[1]);
    assert!(
        refused["error"]["message"]
            .as_str()
            .is_some_and(|m| m.starts_with("Server busy")),
        "{refused}"
    );
    // The GET stream ends: its session holds nothing and is uncounted.
    get.disconnect();
    assert!(
        common::wait_until(Duration::from_secs(10), || set_level(&sessions[2])
            .get("result")
            .is_some()),
        "the ended GET stream still counted"
    );
    // The principal holds one session (the last); the next is refused by the
    // fleet's bound, not by a principal's count holding the refused one.
    let next = set_level(&sessions[3]);
    assert!(
        next["error"]["message"]
            .as_str()
            .is_some_and(|m| m.starts_with("Server busy")),
        "the refused session still counted against its principal: {next}"
    );
}
