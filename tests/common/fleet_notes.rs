//! The demo's notes server as a fleet of in-process nodes on one Redis bus,
//! driven by a 2025-era client: notes added and subscribed, the session's
//! GET stream opened (or resumed with `Last-Event-ID`) and its
//! `notifications/resources/updated` read.

use std::net::SocketAddr;
use std::time::Duration;

use genmcp::http::{CompatConfig, ServerThread};
use genmcp::mux::SharedNotification;
use genmcp::pubsub::Bus;
use genmcp_cli::demo;
use serde_json::{Value, json};

use super::legacy::{self, LEGACY};
use super::{Event, Exchange, Response};

/// The bus every node of a notes fleet shares.
pub type Events = Bus<SharedNotification>;

/// The nodes' shared sealing key.
pub fn key() -> [u8; 32] {
    genmcp::suite::secret::parse_secret(&"5a".repeat(32)).expect("key")
}

/// A notes node on `bus` with the 2025 settings `compat`.
pub fn notes_node_with(bus: &Events, compat: CompatConfig) -> ServerThread {
    let bus = bus.clone();
    let mut config = super::config();
    config.workers = 2;
    config.keep_alive = Duration::from_millis(100);
    config.compat = Some(compat);
    ServerThread::spawn(move || demo::suite_with(bus, Some(key())).0, config).expect("node starts")
}

/// The JSON-RPC message a POST answered with (JSON or one SSE message).
pub fn message(r: &Response) -> Value {
    if r.header("content-type")
        .is_some_and(|c| c.starts_with("text/event-stream"))
    {
        return r.sse_messages().pop().expect("an SSE message");
    }
    r.json()
}

/// Calls `add_note` with `args`: the note's URI (its text answer).
pub fn add_note(addr: SocketAddr, session: &str, args: Value) -> String {
    let r = legacy::request(
        addr,
        session,
        json!("add"),
        "tools/call",
        json!({"name": "add_note", "arguments": args}),
    );
    let m = message(&r);
    m["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_else(|| panic!("add_note answered {m}"))
        .to_owned()
}

/// `resources/subscribe` to `uri`, answered with success.
pub fn subscribe(addr: SocketAddr, session: &str, uri: &str) {
    let r = legacy::request(
        addr,
        session,
        json!("sub"),
        "resources/subscribe",
        json!({"uri": uri}),
    );
    assert_eq!(message(&r)["result"], json!({}), "{}", message(&r));
}

/// The session's GET stream, resumed after `last_event_id` if any.
pub fn get(addr: SocketAddr, session: &str, last_event_id: Option<&str>) -> Exchange {
    let mut h = vec![
        ("Accept".to_owned(), "text/event-stream".to_owned()),
        ("MCP-Protocol-Version".to_owned(), LEGACY.to_owned()),
        ("Mcp-Session-Id".to_owned(), session.to_owned()),
    ];
    if let Some(id) = last_event_id {
        h.push(("Last-Event-ID".to_owned(), id.to_owned()));
    }
    let e = Exchange::open_with(addr, "GET", &h, b"");
    e.set_timeout(Duration::from_secs(10));
    e
}

/// The URI of the next `notifications/resources/updated` (other
/// notifications and keep-alives skipped, at most 300 of them: about 30 s of
/// keep-alives), `None` when the stream ended.
pub fn next_updated(stream: &mut Exchange) -> Option<String> {
    for _ in 0..300 {
        match stream.try_next_event().expect("an event within 10 s")? {
            Event::Message(m) if m["method"] == "notifications/resources/updated" => {
                return Some(m["params"]["uri"].as_str().expect("a uri").to_owned());
            }
            _ => {}
        }
    }
    panic!("no update within 300 events");
}

/// A session initialized on node `a` with `n` notes subscribed and its GET
/// stream open on `a`, one update (the first note's, made on node `b`)
/// heard: the session, the notes' URIs, the stream.
pub fn session_on(a: SocketAddr, b: SocketAddr, n: usize) -> (String, Vec<String>, Exchange) {
    let session = legacy::initialize(a);
    let uris: Vec<String> = (0..n)
        .map(|i| add_note(a, &session, json!({"text": format!("note {i}")})))
        .collect();
    for uri in &uris {
        subscribe(a, &session, uri);
    }
    let mut stream = get(a, &session, None);
    assert_eq!(stream.status, 200);
    add_note(b, &session, json!({"uri": uris[0], "text": "first"}));
    assert_eq!(next_updated(&mut stream).as_deref(), Some(uris[0].as_str()));
    (session, uris, stream)
}

/// The updates of `stream` until it ends or none came for `quiet`
/// (keep-alives do not count), then the stream is cut: the updates and the
/// last id it carried.
pub fn read_until_quiet(mut stream: Exchange, quiet: Duration) -> (Vec<String>, Option<String>) {
    stream.set_timeout(quiet);
    let mut got = Vec::new();
    let mut since = std::time::Instant::now();
    while since.elapsed() < quiet {
        match stream.try_next_event() {
            Ok(Some(Event::Message(m))) if m["method"] == "notifications/resources/updated" => {
                got.push(m["params"]["uri"].as_str().expect("a uri").to_owned());
                since = std::time::Instant::now();
            }
            Ok(Some(_)) => {}
            Ok(None) | Err(_) => break,
        }
    }
    let last = stream.last_id.clone();
    stream.disconnect();
    (got, last)
}

/// What one resumption of a session's GET stream found.
#[derive(Debug, PartialEq, Eq)]
pub enum Resumed {
    /// 410: the events after the id are gone.
    Gone,
    /// 200, and this many updates until it was quiet.
    Read(usize),
}

/// Resumes the session's GET stream on `addr` after `*last` once: on 200
/// its updates until `quiet` are appended to `got` and `*last` moves to the
/// last id read. Any other status fails the test.
pub fn resume_once(
    addr: SocketAddr,
    session: &str,
    (got, last): (&mut Vec<String>, &mut Option<String>),
    quiet: Duration,
) -> Resumed {
    let id = last.clone().expect("events carry ids");
    let resumed = get(addr, session, Some(&id));
    if resumed.status == 410 {
        return Resumed::Gone;
    }
    assert_eq!(resumed.status, 200);
    let (more, next) = read_until_quiet(resumed, quiet);
    let n = more.len();
    got.extend(more);
    if next.is_some() {
        *last = next;
    }
    Resumed::Read(n)
}

/// Resumes (at most `tries` times) until `got` holds `want` updates or the
/// stream is gone: whether it said gone.
pub fn resume_until(
    addr: SocketAddr,
    session: &str,
    (got, last): (&mut Vec<String>, &mut Option<String>),
    (want, quiet, tries): (usize, Duration, usize),
) -> bool {
    for _ in 0..tries {
        if got.len() >= want {
            return false;
        }
        if resume_once(addr, session, (&mut *got, &mut *last), quiet) == Resumed::Gone {
            return true;
        }
    }
    false
}
