//! The 2025-era path under the 2026-07-28 path's rules, over real HTTP:
//! routing headers that disagree with the body (`-32020`, 400), the id cap
//! (`-32600`, never echoed), and the in-flight limit on GET and DELETE (503).

mod common;

use std::io::Write as _;
use std::net::TcpStream;
use std::time::Duration;

use common::legacy::{self, LEGACY};
use common::probe::{self, Mode};
use common::{Response, post, wait_until};
use genmcp::prelude::*;
use serde_json::{Value, json};

fn fixtures() -> genmcp::http::ServerThread {
    genmcp::http::ServerThread::spawn(genmcp_cli::fixtures::suite, common::config())
        .expect("server starts")
}

/// A 2025 request of `session` with extra headers.
fn with_headers(
    addr: std::net::SocketAddr,
    session: &str,
    extra: &[(&str, &str)],
    method: &str,
    params: Value,
) -> Response {
    let mut h = legacy::headers(Some(session));
    h.extend(
        extra
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned())),
    );
    post(
        addr,
        &h,
        &json!({"jsonrpc": "2.0", "id": 7, "method": method, "params": params}),
    )
}

fn assert_mismatch(resp: &Response, what: &str) {
    assert_eq!(
        resp.status,
        400,
        "{what}: {}",
        String::from_utf8_lossy(&resp.body)
    );
    let body = resp.json();
    assert_eq!(body["error"]["code"], -32020, "{what}");
    assert_eq!(body["id"], 7, "{what}");
}

#[test]
fn compat_routing_headers_that_disagree_with_the_body_are_400_like_on_the_2026_path() {
    let srv = fixtures();
    let session = legacy::initialize(srv.addr);
    let simple = json!({"name": "test_simple_text", "arguments": {}});

    let other_tool = with_headers(
        srv.addr,
        &session,
        &[("Mcp-Name", "test_error_handling")],
        "tools/call",
        simple.clone(),
    );
    assert_mismatch(&other_tool, "Mcp-Name naming another tool");

    let other_method = with_headers(
        srv.addr,
        &session,
        &[("Mcp-Method", "tools/list")],
        "tools/call",
        simple.clone(),
    );
    assert_mismatch(&other_method, "Mcp-Method naming another method");

    let other_uri = with_headers(
        srv.addr,
        &session,
        &[("Mcp-Name", "test://other")],
        "resources/read",
        json!({"uri": "test://static-text"}),
    );
    assert_mismatch(&other_uri, "Mcp-Name naming another resource");

    let region = json!({"name": "test_custom_header", "arguments": {"region": "us"}});
    let other_param = with_headers(
        srv.addr,
        &session,
        &[("Mcp-Param-Region", "eu")],
        "tools/call",
        region.clone(),
    );
    assert_mismatch(&other_param, "Mcp-Param-Region naming another value");

    // Headers that agree, and no headers at all (a plain 2025 client), are served.
    let agreeing = with_headers(
        srv.addr,
        &session,
        &[
            ("Mcp-Method", "tools/call"),
            ("Mcp-Name", "test_custom_header"),
            ("Mcp-Param-Region", "us"),
        ],
        "tools/call",
        region.clone(),
    );
    assert_eq!(agreeing.status, 200);
    assert_eq!(agreeing.json()["result"]["content"][0]["text"], "region=us");
    let plain = with_headers(srv.addr, &session, &[], "tools/call", region);
    assert_eq!(plain.status, 200);
    assert_eq!(plain.json()["result"]["content"][0]["text"], "region=us");
}

#[test]
fn compat_an_oversized_id_is_invalid_and_never_echoed() {
    let srv = fixtures();
    let session = legacy::initialize(srv.addr);
    let long = "i".repeat(1024 * 1024);
    for method in ["ping", "initialize"] {
        let resp = post(
            srv.addr,
            &legacy::headers(Some(&session)),
            &json!({"jsonrpc": "2.0", "id": long, "method": method, "params": {
                "protocolVersion": LEGACY, "capabilities": {}}}),
        );
        assert_eq!(resp.status, 400, "{method}");
        assert!(
            resp.body.len() < 1024,
            "{method}: {} bytes",
            resp.body.len()
        );
        assert_eq!(resp.json()["error"]["code"], -32600, "{method}");
        assert_eq!(resp.json()["id"], Value::Null, "{method}");
    }
    // An id at the cap is served.
    let at_cap = "i".repeat(genmcp::protocol::jsonrpc::MAX_ID_LEN);
    let resp = legacy::request(srv.addr, &session, json!(at_cap), "ping", json!({}));
    assert_eq!(resp.status, 200);
    assert_eq!(resp.json()["id"], json!(at_cap));
}

/// Holds one in-flight permit: a POST whose declared body never arrives.
fn hold_a_permit(addr: std::net::SocketAddr) -> TcpStream {
    let mut stream = TcpStream::connect(addr).expect("connect");
    let head = format!(
        "POST /mcp HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\n\
         Accept: application/json, text/event-stream\r\nMCP-Protocol-Version: {LEGACY}\r\n\
         Content-Length: 100\r\n\r\n"
    );
    stream.write_all(head.as_bytes()).expect("write head");
    stream
}

#[test]
fn compat_get_and_delete_take_an_in_flight_permit_like_a_post() {
    let mut config = probe::config();
    config.max_in_flight = 1;
    let caps = SubscriptionCapabilities::none().with_tools_list_changed(true);
    let srv = probe::start(Mode::Accept, caps, config);
    let session = legacy::initialize(srv.addr());
    let ping = |id: i64| legacy::request(srv.addr(), &session, json!(id), "ping", json!({}));

    let held = hold_a_permit(srv.addr());
    assert!(
        wait_until(Duration::from_secs(5), || ping(1).status == 503),
        "the held POST takes the only permit"
    );
    let get = legacy::get(srv.addr(), Some(&session)).into_response();
    assert_eq!(get.status, 503);
    assert_eq!(get.header("retry-after"), Some("1"));
    assert_eq!(legacy::delete(srv.addr(), &session).status, 503);

    drop(held);
    assert!(wait_until(Duration::from_secs(5), || ping(2).status == 200));
    // An open GET stream no longer holds its permit once set up.
    let mut stream = legacy::get(srv.addr(), Some(&session));
    assert_eq!(stream.status, 200);
    srv.wait_subscribers(1);
    assert_eq!(ping(3).status, 200);
    assert_eq!(legacy::delete(srv.addr(), &session).status, 200);
    assert!(stream.next_message().is_none(), "the GET body ends");
}

/// A GET or DELETE of a session naming a version the server does not serve
/// is 400, as a POST is (every request after `initialize` says its version;
/// none at all is allowed: 2025-03-26 is assumed).
#[test]
fn compat_get_and_delete_naming_an_unserved_version_are_400() {
    let caps = SubscriptionCapabilities::none().with_tools_list_changed(true);
    let srv = probe::start(Mode::Accept, caps, probe::config());
    let session = legacy::initialize(srv.addr());
    let with_version = |method: &str, accept: Option<&str>| {
        let mut h = vec![
            ("Mcp-Session-Id".to_owned(), session.clone()),
            ("MCP-Protocol-Version".to_owned(), "1999-01-01".to_owned()),
        ];
        if let Some(a) = accept {
            h.push(("Accept".to_owned(), a.to_owned()));
        }
        common::Exchange::open_with(srv.addr(), method, &h, b"")
    };
    // Only the head is read: a GET wrongly served would stream forever.
    let get = with_version("GET", Some("text/event-stream"));
    let status = get.status;
    get.disconnect();
    assert_eq!(status, 400, "GET naming an unserved version");
    let delete = with_version("DELETE", None).into_response();
    assert_eq!(delete.status, 400);
    assert!(
        delete.json()["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("unsupported MCP-Protocol-Version")),
        "{:?}",
        delete.json()
    );
    // Not deleted: the session still answers.
    let r = legacy::request(srv.addr(), &session, json!(1), "ping", json!({}));
    assert_eq!(r.status, 200);
}
