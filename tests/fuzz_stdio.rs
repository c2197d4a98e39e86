//! The stdio line reader under random bytes: every output line is one
//! well-formed JSON-RPC message, the server never panics, and the output stays
//! bounded by a function of the input. Seeded and bounded; more cases with
//! `PROPTEST_CASES` (see docs/security.md).

#[path = "common/fuzz.rs"]
mod fuzz;

use std::time::Duration;

use fuzz::runner;
use genmcp::prelude::*;
use genmcp::runtime::Server;
use genmcp::transport::stdio::{StdioConfig, serve_io};
use proptest::prelude::*;
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// This file's fuzz seed.
const SEED: u8 = 0x5d;

/// Input lines: valid requests, near-misses and raw junk.
fn input() -> impl Strategy<Value = Vec<u8>> {
    let meta = json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {},
    });
    let good = prop_oneof![
        Just(json!({"jsonrpc": "2.0", "id": 1, "method": "server/discover", "params": {"_meta": meta.clone()}})),
        Just(json!({"jsonrpc": "2.0", "id": "l", "method": "subscriptions/listen",
            "params": {"_meta": meta.clone(), "notifications": {"toolsListChanged": true}}})),
        Just(json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": "l"}})),
        Just(json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {"_meta": meta}})),
    ]
    .prop_map(|v| v.to_string().into_bytes());
    let line = prop_oneof![
        good.clone(),
        (
            good,
            prop::collection::vec((any::<usize>(), any::<u8>()), 1..4)
        )
            .prop_map(|(mut b, edits)| {
                for (at, x) in edits {
                    let i = at % b.len();
                    b[i] = x;
                }
                b
            }),
        prop::collection::vec(any::<u8>(), 0..64),
    ];
    prop::collection::vec(line, 0..12).prop_map(|lines| {
        let mut out = Vec::new();
        for l in lines {
            out.extend(l);
            out.push(b'\n');
        }
        out
    })
}

/// Runs one pipe to the end of its input and returns everything written.
fn run_pipe(input: Vec<u8>) -> Vec<u8> {
    let system = actix_rt::System::new();
    system.block_on(async move {
        let suite = Suite::builder(Implementation::new("fuzz", "1")).build();
        let (client, server_end) = tokio::io::duplex(1024 * 1024);
        let (server_read, server_write) = tokio::io::split(server_end);
        let mut config = StdioConfig::default();
        config.max_line = 1024;
        config.drain_timeout = Duration::from_secs(2);
        let task = actix_rt::spawn(async move {
            serve_io(suite, Server::default(), &config, server_read, server_write).await
        });
        let (mut client_read, mut client_write) = tokio::io::split(client);
        client_write.write_all(&input).await.expect("write input");
        client_write.shutdown().await.expect("EOF");
        let mut out = Vec::new();
        tokio::time::timeout(Duration::from_secs(20), client_read.read_to_end(&mut out))
            .await
            .expect("the pipe ends")
            .expect("read output");
        let _ = tokio::time::timeout(Duration::from_secs(5), task).await;
        out
    })
}

#[test]
fn fuzz_the_stdio_line_reader() {
    runner(256, SEED)
        .run(&input(), |input| {
            let lines = input.split(|b| *b == b'\n').count();
            let out = run_pipe(input.clone());
            let text = std::str::from_utf8(&out).expect("output is UTF-8");
            let mut replies = 0;
            for line in text.lines() {
                let v: Value = serde_json::from_str(line).expect("every line is JSON");
                prop_assert_eq!(&v["jsonrpc"], "2.0", "{}", line);
                let is_response =
                    v.get("id").is_some() && (v.get("result").is_some() ^ v.get("error").is_some());
                let is_notification = v.get("method").is_some_and(Value::is_string);
                prop_assert!(is_response || is_notification, "{}", line);
                if is_response {
                    replies += 1;
                }
            }
            // At most one final reply per input line, and bounded output.
            prop_assert!(replies <= lines, "{replies} replies for {lines} lines");
            prop_assert!(out.len() <= 4096 * lines + 4096, "{} bytes out", out.len());
            Ok(())
        })
        .unwrap();
}
