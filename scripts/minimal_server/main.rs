//! A server on genmcp built with no optional feature (`scripts/minimal-server.sh`
//! builds and runs it; CI runs that): it starts, serves tools and tasks from
//! this process alone, and serves schemas without checking against them.
//! Exits 0 when every check passes, panics otherwise.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

use genmcp::prelude::*;
use serde_json::{Value, json};

const VERSION: &str = "2026-07-28";
const TASKS: &str = "io.modelcontextprotocol/tasks";

fn suite() -> Suite {
    let catalog = Catalog::new();
    catalog.add_tool(
        ToolBuilder::new("echo")
            .description("answers with its arguments")
            .input_schema(json!({"type": "object", "properties": {"n": {"type": "integer"}}}))
            .handler(|call| async move {
                Ok(CallToolResult::text(Value::Object(call.arguments.clone()).to_string()).into())
            }),
    );
    catalog.add_tool(
        ToolBuilder::new("slow")
            .description("a task that ends after 50 ms")
            .task_support(TaskSupport::Required)
            .handler(|_call| async move {
                tokio::time::sleep(Duration::from_millis(50)).await;
                Ok(CallToolResult::text("done").into())
            }),
    );
    Suite::builder(Implementation::new("minimal", "0.0.0"))
        .catalog(catalog)
        .build()
}

/// POSTs one request (`name`: the routing name) and returns its JSON body.
fn post(addr: SocketAddr, method: &str, name: &str, mut params: Value) -> Value {
    params["_meta"] = json!({
        "io.modelcontextprotocol/protocolVersion": VERSION,
        "io.modelcontextprotocol/clientCapabilities": {"extensions": {TASKS: {}}},
    });
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params}).to_string();
    let mut stream = TcpStream::connect(addr).expect("connects");
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .expect("timeout set");
    write!(
        stream,
        "POST /mcp HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\
         Content-Type: application/json\r\nAccept: application/json, text/event-stream\r\n\
         MCP-Protocol-Version: {VERSION}\r\nMcp-Method: {method}\r\nMcp-Name: {name}\r\n\
         Content-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .expect("request sent");
    let mut raw = Vec::new();
    stream.read_to_end(&mut raw).expect("response read");
    let text = String::from_utf8(raw).expect("UTF-8 response");
    let (head, body) = text.split_once("\r\n\r\n").expect("a head and a body");
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    let body = if head
        .to_ascii_lowercase()
        .contains("transfer-encoding: chunked")
    {
        unchunk(body)
    } else {
        body.to_owned()
    };
    serde_json::from_str(&body).unwrap_or_else(|e| panic!("not JSON ({e}): {body}"))
}

fn unchunk(mut body: &str) -> String {
    let mut out = String::new();
    while let Some((size, rest)) = body.split_once("\r\n") {
        let size = usize::from_str_radix(size.trim(), 16).expect("a chunk size");
        if size == 0 {
            break;
        }
        out.push_str(&rest[..size]);
        body = &rest[size + 2..];
    }
    out
}

fn main() {
    let mut config = HttpConfig::default();
    config.port = 0;
    config.workers = 1;
    let server = ServerThread::spawn(suite, config).expect("the server starts");
    let addr = server.addr;

    // Schemas are served, not checked: a string where the schema says
    // integer reaches the handler.
    let listed = post(addr, "tools/list", "", json!({}));
    assert_eq!(
        listed["result"]["tools"][0]["inputSchema"]["properties"]["n"]["type"], "integer",
        "{listed}"
    );
    let echoed = post(
        addr,
        "tools/call",
        "echo",
        json!({"name": "echo", "arguments": {"n": "x"}}),
    );
    assert_eq!(
        echoed["result"]["content"][0]["text"], r#"{"n":"x"}"#,
        "{echoed}"
    );

    // A task lives in this process: created, read until it completes.
    let created = post(
        addr,
        "tools/call",
        "slow",
        json!({"name": "slow", "arguments": {}}),
    );
    assert_eq!(created["result"]["resultType"], "task", "{created}");
    let id = created["result"]["taskId"]
        .as_str()
        .expect("a taskId")
        .to_owned();
    let mut last = Value::Null;
    for _ in 0..200 {
        last = post(addr, "tasks/get", &id, json!({"taskId": id}));
        if last["result"]["status"] == "completed" {
            break;
        }
        std::thread::sleep(Duration::from_millis(25));
    }
    assert_eq!(last["result"]["status"], "completed", "{last}");
    assert_eq!(
        last["result"]["result"]["content"][0]["text"], "done",
        "{last}"
    );

    server.stop();
    println!("minimal server: schemas served unchecked, a task created and completed");
}
