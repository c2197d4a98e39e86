//! What replies reveal and what the defaults expose: no internal error text for
//! a broken body, Host required on HTTP/1.0, and a multi-byte URI that reaches
//! template matching gets a clean not-found.

mod common;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use base64::Engine as _;
use common::{headers, post, request};
use genmcp::http::ServerThread;
use genmcp::prelude::*;
use serde_json::{Value, json};

fn empty() -> ServerThread {
    ServerThread::spawn(
        || Suite::builder(Implementation::new("t", "1")).build(),
        common::config(),
    )
    .expect("server starts")
}

fn raw_exchange(addr: std::net::SocketAddr, bytes: &[u8]) -> String {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    s.write_all(bytes).unwrap();
    let _ = s.shutdown(std::net::Shutdown::Write);
    let mut out = Vec::new();
    let _ = s.read_to_end(&mut out);
    String::from_utf8_lossy(&out).into_owned()
}

fn head_lines(method: &str) -> String {
    headers(method, None)
        .into_iter()
        .map(|(k, v)| format!("{k}: {v}\r\n"))
        .collect()
}

#[test]
fn no_internal_error_text_reaches_a_client_for_a_malformed_chunked_body() {
    let srv = empty();
    for broken in [
        "zz\r\n{}\r\n0\r\n\r\n",                  // not a chunk size
        "5\r\n{\"jsonrpc\"\r\n0\r\n\r\n",         // chunk longer than its size
        "ffffffffffffffffffff\r\nx\r\n0\r\n\r\n", // chunk size overflow
        "3\r\n{}}",                               // cut off mid-body
    ] {
        let req = format!(
            "POST /mcp HTTP/1.1\r\nHost: {}\r\n{}Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n{broken}",
            srv.addr,
            head_lines("tools/list")
        );
        let answer = raw_exchange(srv.addr, req.as_bytes());
        let lower = answer.to_ascii_lowercase();
        for leak in [
            "payload",
            "chunk",
            "eof",
            "incomplete",
            "overflow",
            "error:",
            "io error",
            "decode",
        ] {
            assert!(
                !lower.contains(leak),
                "internal detail {leak:?} reached the client for {broken:?}:\n{answer}"
            );
        }
        if let Some((_, body)) = answer.split_once("\r\n\r\n")
            && let Ok(v) = serde_json::from_str::<Value>(body)
        {
            let message = v["error"]["message"].as_str().unwrap_or_default();
            assert!(
                message == "Bad Request: could not read the body"
                    || message.starts_with("Parse error")
                    || message.starts_with("Invalid Request"),
                "{message}"
            );
        }
    }
}

#[test]
fn an_http_1_0_request_without_host_is_forbidden() {
    let srv = empty();
    let body = request(json!(1), "server/discover", json!({})).to_string();
    let req = format!(
        "POST /mcp HTTP/1.0\r\n{}Content-Length: {}\r\n\r\n{body}",
        head_lines("server/discover"),
        body.len()
    );
    let answer = raw_exchange(srv.addr, req.as_bytes());
    assert!(
        answer.starts_with("HTTP/1.0 403") || answer.starts_with("HTTP/1.1 403"),
        "{answer}"
    );

    // With "*" in the allow-list, Host is not needed.
    let mut config = common::config();
    config.allowed_hosts = vec!["*".into()];
    let open = ServerThread::spawn(
        || Suite::builder(Implementation::new("t", "1")).build(),
        config,
    )
    .expect("server starts");
    let answer = raw_exchange(open.addr, req.as_bytes());
    assert!(answer.contains(" 200 "), "{answer}");
}

#[test]
fn the_multi_byte_template_uri_gets_a_clean_not_found() {
    let srv = ServerThread::spawn(
        || {
            let set = ResourceSet::new("x://").template(
                ResourceTemplate::new("x://{+p}.txt", "t"),
                |r| async move {
                    Ok(ResourceContents::text(r.uri.clone(), "text/plain", "found").into())
                },
            );
            Suite::builder(Implementation::new("t", "1"))
                .resources(set)
                .build()
        },
        common::config(),
    )
    .expect("server starts");
    let read = |uri: &str| {
        let name = format!(
            "=?base64?{}?=",
            base64::engine::general_purpose::STANDARD.encode(uri)
        );
        post(
            srv.addr,
            &headers("resources/read", Some(&name)),
            &request(json!(1), "resources/read", json!({"uri": uri})),
        )
    };
    let r = read("x://a?éé");
    let v = r.json();
    assert_eq!(v["error"]["code"], -32602, "{v}");
    let ok = read("x://é/ü.txt").json();
    assert_eq!(ok["result"]["contents"][0]["text"], "found", "{ok}");
}
