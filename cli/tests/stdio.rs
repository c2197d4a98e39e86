//! The stdio transport: the real binary over real pipes, and the runtime's
//! teardown semantics over an in-process pipe.

#[path = "../../tests/common/mod.rs"]
mod common;

use std::time::Duration;

use common::probe::{Mode, Msg, Probe, Record, send};
use common::stdio_child::Peer;
use genmcp::prelude::*;
use genmcp::runtime::Server;
use genmcp::transport::stdio::{StdioConfig, serve_io};
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt};

fn sub_id(v: &Value) -> &Value {
    &v["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"]
}

#[test]
fn requests_and_listen_streams_are_multiplexed_on_one_pipe() {
    let mut p = Peer::start();
    p.request(json!(1), "server/discover", json!({}));
    let d = p.next();
    assert_eq!(d["id"], 1);
    assert_eq!(d["result"]["supportedVersions"], json!(["2026-07-28"]));

    p.request(
        json!(7),
        "subscriptions/listen",
        json!({"notifications": {"toolsListChanged": true}}),
    );
    p.request(
        json!("s"),
        "subscriptions/listen",
        json!({"notifications": {"toolsListChanged": true}}),
    );
    let mut acked = Vec::new();
    for _ in 0..2 {
        let ack = p.next();
        assert_eq!(ack["method"], "notifications/subscriptions/acknowledged");
        acked.push(sub_id(&ack).clone());
    }
    assert!(
        acked.contains(&json!(7)) && acked.contains(&json!("s")),
        "{acked:?}"
    );

    p.request(
        json!(8),
        "tools/call",
        json!({"name": "toggle_extra_tool", "arguments": {}}),
    );
    let mut ids = Vec::new();
    let mut got_result = false;
    for _ in 0..3 {
        let v = p.next();
        if v["id"] == 8 {
            got_result = true;
        } else {
            assert_eq!(v["method"], "notifications/tools/list_changed");
            ids.push(sub_id(&v).clone());
        }
    }
    assert!(got_result);
    ids.sort_by_key(|v| v.to_string());
    assert_eq!(ids, vec![json!("s"), json!(7)]);

    // Cancel one listen: nothing more for it, not even a completion result.
    p.send(
        &json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 7}}),
    );
    std::thread::sleep(Duration::from_millis(200));
    p.request(
        json!(9),
        "tools/call",
        json!({"name": "toggle_extra_tool", "arguments": {}}),
    );
    let mut rest = Vec::new();
    for _ in 0..2 {
        rest.push(p.next());
    }
    assert!(rest.iter().any(|v| v["id"] == 9));
    let n = rest
        .iter()
        .find(|v| v.get("method").is_some())
        .expect("a notification");
    assert_eq!(sub_id(n), &json!("s"));
    assert!(
        p.silent_for(Duration::from_millis(300)),
        "nothing more for the cancelled id"
    );
}

#[test]
fn errors_echo_ids_and_bad_lines_do_not_stop_the_server() {
    let mut p = Peer::start();
    p.send_raw(b"{not json\n\n");
    let e = p.next();
    assert_eq!(
        (e["id"].clone(), e["error"]["code"].clone()),
        (Value::Null, json!(-32700))
    );
    p.send(&json!({"jsonrpc": "2.0", "id": 3, "method": "server/discover"}));
    assert_eq!(p.next()["error"]["code"], -32602);
    p.request(json!("u"), "ping", json!({}));
    let e = p.next();
    assert_eq!(
        (e["id"].clone(), e["error"]["code"].clone()),
        (json!("u"), json!(-32601))
    );
    let mut body = common::request(json!(4), "server/discover", json!({}));
    body["params"]["_meta"]["io.modelcontextprotocol/protocolVersion"] = json!("v999.0.0");
    p.send(&body);
    let e = p.next();
    assert_eq!(e["error"]["code"], -32022);
    assert_eq!(e["error"]["data"]["requested"], "v999.0.0");
    p.request(json!(5), "server/discover", json!({}));
    assert_eq!(p.next()["id"], 5);
}

#[test]
fn stdin_eof_makes_the_server_exit_promptly() {
    let mut p = Peer::start();
    p.request(
        json!(1),
        "subscriptions/listen",
        json!({"notifications": {"toolsListChanged": true}}),
    );
    p.next();
    drop(p.stdin.take());
    let mut status = None;
    for _ in 0..100 {
        if let Some(s) = p.child.try_wait().unwrap() {
            status = Some(s);
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(
        status.is_some_and(|s| s.success()),
        "exit status {status:?}"
    );
}

#[test]
fn sigterm_sends_completion_results_before_exiting() {
    let mut p = Peer::start();
    p.request(
        json!("a"),
        "subscriptions/listen",
        json!({"notifications": {"toolsListChanged": true}}),
    );
    p.next();
    p.terminate();
    let (done, _) = p.until(|v| v.get("result").is_some());
    assert_eq!(done["id"], "a");
    assert_eq!(
        done["result"]["_meta"]["io.modelcontextprotocol/subscriptionId"],
        "a"
    );
    let mut exited = false;
    for _ in 0..100 {
        if p.child.try_wait().unwrap().is_some_and(|s| s.success()) {
            exited = true;
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(exited);
}

/// The runtime side, in process: cancel and EOF run handle_close exactly once.
#[actix_rt::test]
async fn cancel_and_eof_run_handle_close_once_each() {
    let bus: Bus<Msg> = Bus::new();
    let record = std::sync::Arc::new(Record::default());
    let suite = Suite::builder(Implementation::new("pipe", "1"))
        .subscriptions(Probe {
            bus: bus.clone(),
            mode: Mode::Accept,
            caps: SubscriptionCapabilities::none().with_tools_list_changed(true),
            record: record.clone(),
        })
        .build();
    let (client, server_end) = tokio::io::duplex(64 * 1024);
    let (server_read, server_write) = tokio::io::split(server_end);
    let server = Server::default();
    let config = StdioConfig::default();
    let task = actix_rt::spawn({
        let server = server.clone();
        async move { serve_io(suite, server, &config, server_read, server_write).await }
    });
    let (client_read, mut client_write) = tokio::io::split(client);
    let mut lines = tokio::io::BufReader::new(client_read).lines();
    for id in [1, 2] {
        let req = common::request(
            json!(id),
            "subscriptions/listen",
            json!({"notifications": {"toolsListChanged": true}}),
        );
        client_write
            .write_all(format!("{req}\n").as_bytes())
            .await
            .unwrap();
        let line = tokio::time::timeout(Duration::from_secs(5), lines.next_line())
            .await
            .expect("ack in time");
        let ack: Value = serde_json::from_str(&line.unwrap().unwrap()).unwrap();
        assert_eq!(sub_id(&ack), &json!(id));
    }
    let cancel =
        json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 1}});
    client_write
        .write_all(format!("{cancel}\n").as_bytes())
        .await
        .unwrap();
    for _ in 0..200 {
        if !record.closed.lock().unwrap().is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(*record.closed.lock().unwrap(), vec![RequestId::Number(1)]);
    bus.publish("all", send(Notification::tools_list_changed()));
    let n: Value = serde_json::from_str(&lines.next_line().await.unwrap().unwrap()).unwrap();
    assert_eq!(sub_id(&n), &json!(2), "only the stream still open gets it");
    client_write.shutdown().await.unwrap(); // EOF for the server's reader
    tokio::time::timeout(Duration::from_secs(10), task)
        .await
        .expect("serve_io ends")
        .unwrap()
        .unwrap();
    let mut closed = record.closed.lock().unwrap().clone();
    closed.sort_by_key(|id| id.to_string());
    assert_eq!(closed, vec![RequestId::Number(1), RequestId::Number(2)]);
    assert_eq!(server.metrics().closed(CloseReason::Cancelled), 1);
    assert_eq!(server.metrics().closed(CloseReason::Disconnected), 1);
    assert_eq!(server.metrics().open_streams, 0);
}

/// Runs `serve_io` in process over a duplex pipe with a probe handler.
struct PipeServer {
    bus: Bus<Msg>,
    record: std::sync::Arc<Record>,
    server: Server,
    task: tokio::task::JoinHandle<std::io::Result<()>>,
    lines: tokio::io::Lines<tokio::io::BufReader<tokio::io::ReadHalf<tokio::io::DuplexStream>>>,
    write: tokio::io::WriteHalf<tokio::io::DuplexStream>,
}

impl PipeServer {
    fn start(config: StdioConfig, pipe_bytes: usize) -> PipeServer {
        let bus: Bus<Msg> = Bus::new();
        let record = std::sync::Arc::new(Record::default());
        let suite = Suite::builder(Implementation::new("pipe", "1"))
            .subscriptions(Probe {
                bus: bus.clone(),
                mode: Mode::Accept,
                caps: SubscriptionCapabilities::none()
                    .with_tools_list_changed(true)
                    .with_resources_updated(true),
                record: record.clone(),
            })
            .build();
        let (client, server_end) = tokio::io::duplex(pipe_bytes);
        let (server_read, server_write) = tokio::io::split(server_end);
        let server = Server::new(config.limits.clone());
        let task = actix_rt::spawn({
            let server = server.clone();
            async move { serve_io(suite, server, &config, server_read, server_write).await }
        });
        let (read, write) = tokio::io::split(client);
        PipeServer {
            bus,
            record,
            server,
            task,
            lines: tokio::io::BufReader::new(read).lines(),
            write,
        }
    }

    async fn write(&mut self, text: String) {
        self.write.write_all(text.as_bytes()).await.unwrap();
    }

    async fn next(&mut self) -> Value {
        let line = tokio::time::timeout(Duration::from_secs(10), self.lines.next_line())
            .await
            .expect("a line in time")
            .unwrap()
            .expect("the pipe is open");
        serde_json::from_str(&line).unwrap()
    }

    async fn silent(&mut self, d: Duration) -> bool {
        tokio::time::timeout(d, self.lines.next_line())
            .await
            .is_err()
    }
}

fn listen_line(id: Value, notifications: Value) -> String {
    format!(
        "{}\n",
        common::request(
            id,
            "subscriptions/listen",
            json!({"notifications": notifications})
        )
    )
}

fn cancel_line(id: Value) -> String {
    format!(
        "{}\n",
        json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": id}})
    )
}

#[actix_rt::test]
async fn a_cancel_right_behind_its_listen_is_honoured_and_the_id_can_listen_again() {
    let mut p = PipeServer::start(StdioConfig::default(), 64 * 1024);
    // Both lines in one write: the cancel must still find the stream.
    p.write(listen_line(json!(1), json!({"toolsListChanged": true})) + &cancel_line(json!(1)))
        .await;
    let ack = p.next().await;
    assert_eq!(sub_id(&ack), &json!(1));
    for _ in 0..100 {
        if !p.record.closed.lock().unwrap().is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(*p.record.closed.lock().unwrap(), vec![RequestId::Number(1)]);
    p.bus
        .publish("all", send(Notification::tools_list_changed()));
    assert!(
        p.silent(Duration::from_millis(300)).await,
        "nothing more for a cancelled id"
    );
    // The id is free again at once.
    p.write(listen_line(json!(1), json!({"toolsListChanged": true})))
        .await;
    let ack = p.next().await;
    assert_eq!(ack["method"], "notifications/subscriptions/acknowledged");
    assert_eq!(sub_id(&ack), &json!(1));
    for _ in 0..100 {
        if p.bus.subscribers("all").len() == 1 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    p.bus
        .publish("all", send(Notification::tools_list_changed()));
    assert_eq!(p.next().await["method"], "notifications/tools/list_changed");
    assert_eq!(p.server.metrics().closed(CloseReason::Cancelled), 1);
}

#[actix_rt::test]
async fn an_overflowing_stream_on_a_pipe_ends_with_an_error_for_its_id() {
    let mut config = StdioConfig::default();
    config.limits.stall_timeout = Duration::from_millis(200);
    config.limits.outbox_capacity = 4;
    config.limits.spill_limit = 4;
    // A tiny pipe that the test does not read: stdout backs up at once.
    let mut p = PipeServer::start(config, 1024);
    let uri = format!("res://{}", "w".repeat(500));
    p.write(listen_line(
        json!("slow"),
        json!({"resourceSubscriptions": [uri.clone()]}),
    ))
    .await;
    for _ in 0..200 {
        if p.bus.subscribers("all").len() == 1 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    for _ in 0..200 {
        if p.bus
            .publish("all", send(Notification::resource_updated(uri.clone())))
            == 0
        {
            break;
        }
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    // Now read: whatever was written before the cut, then the error for the id
    // (the stream holds its id until that error is in the outbox).
    let mut last = p.next().await;
    while last.get("error").is_none() {
        assert_eq!(
            last["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"],
            "slow"
        );
        last = p.next().await;
    }
    assert_eq!(last["id"], "slow");
    assert_eq!(last["error"]["code"], -32603);
    for _ in 0..500 {
        if p.server.metrics().closed(CloseReason::Overflow) == 1 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(p.server.metrics().closed(CloseReason::Overflow), 1);
    assert_eq!(
        p.record.closed.lock().unwrap().len(),
        1,
        "overflow is a teardown the handler did not choose: handle_close runs"
    );
    p.write.shutdown().await.unwrap();
    tokio::time::timeout(Duration::from_secs(10), p.task)
        .await
        .unwrap()
        .unwrap()
        .unwrap();
}
