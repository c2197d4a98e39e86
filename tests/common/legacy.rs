//! A 2025-era client for the compatibility-path tests: initialize, session
//! headers, GET streams.

use std::net::SocketAddr;
use std::sync::mpsc;

use serde_json::{Value, json};

use super::{Event, Exchange, Response, post};

pub const LEGACY: &str = "2025-11-25";

/// POST headers of a 2025 client (no Mcp-Method), with a session when given.
pub fn headers(session: Option<&str>) -> Vec<(String, String)> {
    let mut h = vec![
        ("Content-Type".to_owned(), "application/json".to_owned()),
        (
            "Accept".to_owned(),
            "application/json, text/event-stream".to_owned(),
        ),
        ("MCP-Protocol-Version".to_owned(), LEGACY.to_owned()),
    ];
    if let Some(s) = session {
        h.push(("Mcp-Session-Id".to_owned(), s.to_owned()));
    }
    h
}

/// `initialize` asking for `version`; returns the response.
pub fn initialize_with(addr: SocketAddr, version: &str, capabilities: Value) -> Response {
    let mut h = headers(None);
    h.retain(|(k, _)| k != "MCP-Protocol-Version");
    post(
        addr,
        &h,
        &json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": version, "capabilities": capabilities,
            "clientInfo": {"name": "legacy-tests", "version": "1"}}}),
    )
}

/// Initializes a session and returns its id.
pub fn initialize(addr: SocketAddr) -> String {
    let resp = initialize_with(addr, LEGACY, json!({}));
    assert_eq!(resp.status, 200, "{}", String::from_utf8_lossy(&resp.body));
    let session = resp
        .header("mcp-session-id")
        .expect("a session id")
        .to_owned();
    let n = post(
        addr,
        &headers(Some(&session)),
        &json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
    );
    assert_eq!(n.status, 202);
    session
}

/// A request of the session.
pub fn request(
    addr: SocketAddr,
    session: &str,
    id: Value,
    method: &str,
    params: Value,
) -> Response {
    post(
        addr,
        &headers(Some(session)),
        &json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}),
    )
}

/// Opens the session's GET stream.
pub fn get(addr: SocketAddr, session: Option<&str>) -> Exchange {
    let mut h = vec![
        ("Accept".to_owned(), "text/event-stream".to_owned()),
        ("MCP-Protocol-Version".to_owned(), LEGACY.to_owned()),
    ];
    if let Some(s) = session {
        h.push(("Mcp-Session-Id".to_owned(), s.to_owned()));
    }
    Exchange::open_with(addr, "GET", &h, b"")
}

/// Reads an SSE body (a GET stream, or any stream) on its own thread: its
/// messages, then `None` when it ends.
pub fn reader(get: Exchange) -> mpsc::Receiver<Option<Value>> {
    read_stream(get, None)
}

/// [`reader`] as a 2025 client reads: when the body ends after a `retry`
/// hint (a reader that could not read Redis in time, as after its node was
/// paused past the command timeout), it resumes with `Last-Event-ID` on
/// `addr` (at most 10 times); it ends otherwise, or when the resumption is
/// refused.
pub fn resuming_reader(
    addr: SocketAddr,
    session: &str,
    get: Exchange,
) -> mpsc::Receiver<Option<Value>> {
    read_stream(get, Some((addr, session.to_owned())))
}

fn read_stream(
    mut get: Exchange,
    resume: Option<(SocketAddr, String)>,
) -> mpsc::Receiver<Option<Value>> {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let mut resumed = 0;
        loop {
            match get.try_next_event() {
                Ok(Some(Event::Message(m))) => {
                    if tx.send(Some(m)).is_err() {
                        return;
                    }
                }
                Ok(Some(Event::Comment(_))) => {}
                Ok(None) if get.retry.is_some() && resumed < 10 => {
                    let (Some((addr, session)), Some(last)) = (&resume, get.last_id.clone()) else {
                        let _ = tx.send(None);
                        return;
                    };
                    let h = vec![
                        ("Accept".to_owned(), "text/event-stream".to_owned()),
                        ("MCP-Protocol-Version".to_owned(), LEGACY.to_owned()),
                        ("Mcp-Session-Id".to_owned(), session.clone()),
                        ("Last-Event-ID".to_owned(), last),
                    ];
                    get = Exchange::open_with(*addr, "GET", &h, b"");
                    resumed += 1;
                    if get.status != 200 {
                        let _ = tx.send(None);
                        return;
                    }
                }
                Ok(None) | Err(_) => {
                    let _ = tx.send(None);
                    return;
                }
            }
        }
    });
    rx
}

/// DELETEs the session.
pub fn delete(addr: SocketAddr, session: &str) -> Response {
    let h = vec![
        ("Mcp-Session-Id".to_owned(), session.to_owned()),
        ("MCP-Protocol-Version".to_owned(), LEGACY.to_owned()),
    ];
    Exchange::open_with(addr, "DELETE", &h, b"").into_response()
}

/// The session id inside a sealed session token (`kid.payload.tag`): the
/// key of the session's state in Redis.
pub fn sid_of(token: &str) -> String {
    use base64::Engine as _;
    let body = token
        .split('.')
        .nth(1)
        .expect("a sealed token (kid.payload.tag)");
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(body)
        .expect("base64url");
    let payload: Value = serde_json::from_slice(&bytes).expect("JSON");
    payload["sid"].as_str().expect("a sid").to_owned()
}
