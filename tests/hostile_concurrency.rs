//! Concurrency and order on HTTP: a bounded number of requests in flight (past
//! it 503 with Retry-After), and authentication on the head before the body.

mod common;

use std::io::{BufReader, Read, Write};
use std::net::TcpStream;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use common::{headers, request};
use genmcp::http::ServerThread;
use genmcp::prelude::*;
use serde_json::{Value, json};

const LIMIT: usize = 8;
const CLIENTS: usize = 1_000;

/// Reads one HTTP/1.1 response (Content-Length bodies only) from `stream`.
fn read_response(stream: TcpStream) -> (u16, Vec<(String, String)>, Vec<u8>) {
    let mut reader = BufReader::new(stream);
    let (status, headers) = common::read_head(&mut reader);
    let headers: Vec<(String, String)> = headers
        .into_iter()
        .map(|(k, v)| (k.to_ascii_lowercase(), v))
        .collect();
    let len = headers
        .iter()
        .find(|(k, _)| k == "content-length")
        .and_then(|(_, v)| v.parse().ok())
        .unwrap_or(0);
    let mut body = vec![0u8; len];
    reader.read_exact(&mut body).expect("body");
    (status, headers, body)
}

fn head(addr: std::net::SocketAddr, extra: &[(String, String)], len: usize) -> String {
    let mut head = format!("POST /mcp HTTP/1.1\r\nHost: {addr}\r\n");
    for (k, v) in extra {
        head.push_str(&format!("{k}: {v}\r\n"));
    }
    head.push_str(&format!(
        "Content-Length: {len}\r\nConnection: close\r\n\r\n"
    ));
    head
}

#[test]
fn a_thousand_concurrent_posts_get_answers_or_503() {
    let running = Arc::new(AtomicUsize::new(0));
    let peak = Arc::new(AtomicUsize::new(0));
    let (r, p) = (running.clone(), peak.clone());
    let mut config = common::config();
    config.max_in_flight = LIMIT;
    let srv = ServerThread::spawn(
        move || {
            Suite::builder(Implementation::new("t", "1"))
                .tool(
                    ToolBuilder::new("slow")
                        .description("takes a while")
                        .handler(move |_| {
                            let (r, p) = (r.clone(), p.clone());
                            async move {
                                let now = r.fetch_add(1, Ordering::SeqCst) + 1;
                                p.fetch_max(now, Ordering::SeqCst);
                                tokio::time::sleep(Duration::from_millis(200)).await;
                                r.fetch_sub(1, Ordering::SeqCst);
                                Ok(CallToolResult::text("done").into())
                            }
                        }),
                )
                .build()
        },
        config,
    )
    .expect("server starts");
    let body = request(json!(1), "tools/call", json!({"name": "slow"})).to_string();
    let head = head(srv.addr, &headers("tools/call", Some("slow")), body.len());
    let mut streams = Vec::with_capacity(CLIENTS);
    for _ in 0..CLIENTS {
        let mut s = TcpStream::connect(srv.addr).expect("connect");
        s.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
        s.write_all(head.as_bytes()).unwrap();
        // The server may answer 503 (and close) before reading the body.
        let _ = s.write_all(body.as_bytes());
        streams.push(s);
    }
    let (mut ok, mut busy) = (0, 0);
    for s in streams {
        let (status, headers, body) = read_response(s);
        let v: Value = serde_json::from_slice(&body).expect("a JSON body");
        match status {
            200 => {
                assert_eq!(v["result"]["content"][0]["text"], "done", "{v}");
                ok += 1;
            }
            503 => {
                assert!(
                    headers.iter().any(|(k, _)| k == "retry-after"),
                    "{headers:?}"
                );
                assert_eq!(v["error"]["code"], -32603, "{v}");
                busy += 1;
            }
            other => panic!("unexpected status {other}: {v}"),
        }
    }
    assert_eq!(ok + busy, CLIENTS);
    assert!(ok >= 1, "nothing was served");
    assert!(busy >= 1, "nothing was refused: the limit is not enforced");
    let peak = peak.load(Ordering::SeqCst);
    assert!(
        peak <= LIMIT,
        "{peak} handlers ran at once; the limit is {LIMIT}"
    );
    eprintln!("{ok} answered, {busy} refused with 503, at most {peak} at once");
}

#[test]
fn an_unauthenticated_4_mib_post_is_refused_before_the_body_is_read() {
    let mut config = common::config();
    config.assigns = Some(Arc::new(|req: &actix_web::HttpRequest| {
        match req
            .headers()
            .get("authorization")
            .and_then(|v| v.to_str().ok())
        {
            Some("Bearer ok") => Ok(Assigns::new()),
            _ => Err("a bearer token is required".into()),
        }
    }));
    let srv = ServerThread::spawn(
        || Suite::builder(Implementation::new("t", "1")).build(),
        config,
    )
    .expect("server starts");
    let len = 4 * 1024 * 1024;
    let mut s = TcpStream::connect(srv.addr).unwrap();
    s.write_all(head(srv.addr, &headers("tools/list", None), len).as_bytes())
        .unwrap();
    // A sixty-fourth of the body, then nothing more: the answer must come anyway.
    s.write_all(&vec![b' '; len / 64]).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let (status, headers, body) = read_response(s);
    assert_eq!(status, 401, "{}", String::from_utf8_lossy(&body));
    assert!(headers.iter().any(|(k, _)| k == "www-authenticate"));
}
