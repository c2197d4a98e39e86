//! Every phase has a deadline: a slow-drip body is cut, a unary handler that
//! never returns is answered (and dropped), and stdio shutdown does not hang on a
//! peer that stopped reading.

mod common;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use common::{call, headers, request, wait_until};
use genmcp::http::ServerThread;
use genmcp::prelude::*;
use genmcp::runtime::Server;
use genmcp::transport::stdio::{StdioConfig, serve_io};
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt};

/// Sets its flag when dropped: tells whether the handler's future was dropped.
struct DropFlag(Arc<AtomicBool>);

impl Drop for DropFlag {
    fn drop(&mut self) {
        self.0.store(true, Ordering::SeqCst);
    }
}

fn hanging_suite(dropped: Arc<AtomicBool>) -> Suite<NoSubscriptions> {
    Suite::builder(Implementation::new("hang", "1"))
        .tool(
            ToolBuilder::new("hang")
                .description("never returns")
                .handler(move |_| {
                    let flag = DropFlag(dropped.clone());
                    async move {
                        let _flag = flag;
                        std::future::pending::<()>().await;
                        Ok(CallToolResult::text("unreachable").into())
                    }
                }),
        )
        .build()
}

#[test]
fn a_slow_drip_body_is_cut_at_the_body_deadline() {
    let mut config = common::config();
    config.body_timeout = Duration::from_millis(400);
    let srv = ServerThread::spawn(
        || Suite::builder(Implementation::new("t", "1")).build(),
        config,
    )
    .expect("server starts");
    let body = request(json!(1), "tools/list", json!({})).to_string();
    let mut stream = TcpStream::connect(srv.addr).unwrap();
    let mut head = format!("POST /mcp HTTP/1.1\r\nHost: {}\r\n", srv.addr);
    for (k, v) in headers("tools/list", None) {
        head.push_str(&format!("{k}: {v}\r\n"));
    }
    head.push_str(&format!("Content-Length: {}\r\n\r\n", body.len()));
    stream.write_all(head.as_bytes()).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_millis(50)))
        .unwrap();
    // One byte every 50 ms: the whole body would take several seconds.
    let mut answer = Vec::new();
    let mut sent = 0;
    for byte in body.bytes() {
        if stream.write_all(&[byte]).is_err() {
            break;
        }
        sent += 1;
        let mut buf = [0u8; 4096];
        match stream.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => {
                answer.extend_from_slice(&buf[..n]);
                break;
            }
            Err(_) => continue,
        }
    }
    assert!(
        sent < body.len(),
        "the whole body was accepted byte by byte ({sent} bytes)"
    );
    stream
        .set_read_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    let _ = stream.read_to_end(&mut answer);
    let text = String::from_utf8_lossy(&answer);
    assert!(
        text.is_empty() || text.starts_with("HTTP/1.1 408"),
        "expected 408 or a closed connection: {text}"
    );
}

#[test]
fn a_unary_handler_that_never_returns_is_answered_at_the_deadline() {
    let dropped = Arc::new(AtomicBool::new(false));
    let mut config = common::config();
    config.request_timeout = Duration::from_millis(300);
    let flag = dropped.clone();
    let srv = ServerThread::spawn(move || hanging_suite(flag), config).expect("server starts");
    let r = call(srv.addr, json!(7), "tools/call", json!({"name": "hang"}));
    assert_eq!(r.status, 200, "a handler-origin -32603 travels in-band");
    let body = r.json();
    assert_eq!(body["id"], 7);
    assert_eq!(body["error"]["code"], -32603);
    assert_eq!(body["error"]["message"], "Request timed out");
    assert!(
        wait_until(Duration::from_secs(5), || dropped.load(Ordering::SeqCst)),
        "the handler's future was not dropped"
    );
}

fn tool_call_line(id: i64, name: &str) -> String {
    format!(
        "{}\n",
        request(json!(id), "tools/call", json!({"name": name}))
    )
}

#[actix_rt::test]
async fn a_unary_handler_that_never_returns_on_stdio_is_answered_at_the_deadline() {
    let dropped = Arc::new(AtomicBool::new(false));
    let (client, server_end) = tokio::io::duplex(64 * 1024);
    let (server_read, server_write) = tokio::io::split(server_end);
    let server = Server::default();
    let mut config = StdioConfig::default();
    config.request_timeout = Duration::from_millis(300);
    let suite = hanging_suite(dropped.clone());
    let task = actix_rt::spawn({
        let server = server.clone();
        async move { serve_io(suite, server, &config, server_read, server_write).await }
    });
    let (client_read, mut client_write) = tokio::io::split(client);
    let mut lines = tokio::io::BufReader::new(client_read).lines();
    client_write
        .write_all(tool_call_line(3, "hang").as_bytes())
        .await
        .unwrap();
    let line = tokio::time::timeout(Duration::from_secs(10), lines.next_line())
        .await
        .expect("an answer at the deadline")
        .unwrap()
        .unwrap();
    let v: Value = serde_json::from_str(&line).unwrap();
    assert_eq!(v["id"], 3);
    assert_eq!(v["error"]["code"], -32603);
    assert_eq!(v["error"]["message"], "Request timed out");
    assert!(dropped.load(Ordering::SeqCst));
    client_write.shutdown().await.unwrap();
    let _ = tokio::time::timeout(Duration::from_secs(10), task).await;
}

#[actix_rt::test]
async fn stdio_shutdown_does_not_hang_when_the_peer_stops_reading() {
    let suite = Suite::builder(Implementation::new("t", "1")).build();
    // A tiny pipe nobody reads, and an outbox of one frame.
    let (client, server_end) = tokio::io::duplex(64);
    let (server_read, server_write) = tokio::io::split(server_end);
    let mut limits = Limits::default();
    limits.outbox_capacity = 1;
    limits.stall_timeout = Duration::from_millis(200);
    let server = Server::new(limits.clone());
    let mut config = StdioConfig::default();
    config.limits = limits;
    config.drain_timeout = Duration::from_millis(200);
    let task = actix_rt::spawn({
        let server = server.clone();
        async move { serve_io(suite, server, &config, server_read, server_write).await }
    });
    let (_client_read, mut client_write) = tokio::io::split(client);
    // Each bad line gets an error reply; none is read, so the writer blocks, the
    // outbox fills and the read loop finds no room for the next reply.
    for _ in 0..6 {
        client_write.write_all(b"{nope\n").await.unwrap();
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    server.shutdown();
    let ended = tokio::time::timeout(Duration::from_secs(15), task).await;
    assert!(
        ended.is_ok(),
        "serve_io did not return after shutdown while the peer was not reading"
    );
}
