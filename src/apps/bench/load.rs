//! The load generator: real loopback HTTP/1.1 clients on one thread (a tokio
//! current-thread runtime), the same for every server it drives. Listens are
//! raw sockets whose SSE frames are counted as they arrive; `burst` is an
//! ordinary `tools/call`.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use super::Kind;

const PROTOCOL: &str = "2026-07-28";
/// The URI every stream subscribes to in the `resources` scenario.
pub const BENCH_URI: &str = "note://bench";
const FRAME_MARK: &[u8] = b"data: ";

fn io_err(msg: impl Into<String>) -> std::io::Error {
    std::io::Error::other(msg.into())
}

fn meta() -> Value {
    json!({"io.modelcontextprotocol/protocolVersion": PROTOCOL,
           "io.modelcontextprotocol/clientCapabilities": {}})
}

async fn post(
    addr: SocketAddr,
    path: &str,
    body: &Value,
    method: &str,
    name: Option<&str>,
) -> std::io::Result<TcpStream> {
    let body = body.to_string();
    let name = name
        .map(|n| format!("Mcp-Name: {n}\r\n"))
        .unwrap_or_default();
    let head = format!(
        "POST {path} HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\n\
         Accept: application/json, text/event-stream\r\nMCP-Protocol-Version: {PROTOCOL}\r\n\
         Mcp-Method: {method}\r\n{name}Content-Length: {}\r\n\r\n{body}",
        body.len()
    );
    let mut s = TcpStream::connect(addr).await?;
    s.set_nodelay(true)?;
    s.write_all(head.as_bytes()).await?;
    Ok(s)
}

/// Counts SSE `data:` lines across reads (a mark may straddle two reads).
#[derive(Default)]
struct Counter {
    carry: usize,
}

impl Counter {
    fn feed(&mut self, bytes: &[u8]) -> usize {
        let mut seen = 0;
        for &b in bytes {
            if b == FRAME_MARK[self.carry] {
                self.carry += 1;
                if self.carry == FRAME_MARK.len() {
                    seen += 1;
                    self.carry = 0;
                }
            } else {
                self.carry = usize::from(b == FRAME_MARK[0]);
            }
        }
        seen
    }
}

/// An open listen stream whose acknowledgement has arrived.
pub struct Listen {
    socket: TcpStream,
    counter: Counter,
    /// Frames already read past the acknowledgement.
    extra: usize,
}

/// Opens a listen with request id `id` and reads until its acknowledgement.
pub async fn listen(
    addr: SocketAddr,
    path: &str,
    id: usize,
    kind: Kind,
) -> std::io::Result<Listen> {
    let notifications = match kind {
        Kind::Tools => json!({"toolsListChanged": true}),
        Kind::Resources => json!({"resourceSubscriptions": [BENCH_URI]}),
    };
    let body = json!({"jsonrpc": "2.0", "id": id, "method": "subscriptions/listen",
        "params": {"_meta": meta(), "notifications": notifications}});
    let mut socket = post(addr, path, &body, "subscriptions/listen", None).await?;
    let mut counter = Counter::default();
    let mut buf = vec![0u8; 4096];
    let mut seen = 0;
    while seen == 0 {
        let n = tokio::time::timeout(Duration::from_secs(30), socket.read(&mut buf))
            .await
            .map_err(|_| io_err("no acknowledgement within 30 s"))??;
        if n == 0 {
            return Err(io_err(format!(
                "listen {id} closed before its acknowledgement"
            )));
        }
        seen += counter.feed(&buf[..n]);
    }
    Ok(Listen {
        socket,
        counter,
        extra: seen - 1,
    })
}

impl Listen {
    /// Reads until `want` frames arrived; returns the arrival time of each.
    pub async fn receive(mut self, want: usize, stamps: bool) -> std::io::Result<Vec<Instant>> {
        let mut times = Vec::with_capacity(if stamps { want } else { 0 });
        let mut seen = self.extra.min(want);
        let now = Instant::now();
        if stamps {
            times.extend(std::iter::repeat_n(now, seen));
        }
        let mut buf = vec![0u8; 64 * 1024];
        while seen < want {
            let n = tokio::time::timeout(Duration::from_secs(60), self.socket.read(&mut buf))
                .await
                .map_err(|_| io_err(format!("stalled after {seen} of {want} frames")))??;
            if n == 0 {
                return Err(io_err(format!(
                    "stream ended after {seen} of {want} frames"
                )));
            }
            let got = self.counter.feed(&buf[..n]).min(want - seen);
            if stamps {
                times.extend(std::iter::repeat_n(Instant::now(), got));
            }
            seen += got;
        }
        Ok(times)
    }
}

/// Calls the `burst` tool: `count` events to every open stream; returns once
/// the server answered (it answers after handing every event over).
pub async fn burst(addr: SocketAddr, path: &str, count: usize, kind: Kind) -> std::io::Result<()> {
    let mut arguments = json!({"count": count});
    if kind == Kind::Resources {
        arguments["kind"] = json!("resources");
        arguments["uri"] = json!(BENCH_URI);
    }
    let body = json!({"jsonrpc": "2.0", "id": "burst", "method": "tools/call",
        "params": {"_meta": meta(), "name": "burst", "arguments": arguments}});
    let mut s = post(addr, path, &body, "tools/call", Some("burst")).await?;
    let mut response = Vec::new();
    let mut buf = vec![0u8; 4096];
    // The answer is small: read until the JSON body is complete.
    loop {
        let n = tokio::time::timeout(Duration::from_secs(120), s.read(&mut buf))
            .await
            .map_err(|_| io_err("burst did not answer within 120 s"))??;
        if n == 0 {
            break;
        }
        response.extend_from_slice(&buf[..n]);
        if response.windows(8).any(|w| w == b"\"result\"") && response.ends_with(b"}") {
            break;
        }
        if response.windows(7).any(|w| w == b"\"error\"") && response.ends_with(b"}") {
            return Err(io_err(format!(
                "burst failed: {}",
                String::from_utf8_lossy(&response)
            )));
        }
    }
    if response.windows(14).any(|w| w == b"\"isError\":true") {
        return Err(io_err(format!(
            "burst failed: {}",
            String::from_utf8_lossy(&response)
        )));
    }
    if !response.starts_with(b"HTTP/1.1 200") {
        return Err(io_err(format!(
            "burst answered {}",
            String::from_utf8_lossy(&response[..response.len().min(200)])
        )));
    }
    Ok(())
}

/// Opens `n` listens, at most 64 being set up at a time.
pub async fn open_many(
    addr: SocketAddr,
    path: &str,
    n: usize,
    kind: Kind,
) -> std::io::Result<Vec<Listen>> {
    use futures_util::StreamExt as _;
    let path = path.to_owned();
    futures_util::stream::iter(0..n)
        .map(|i| {
            let path = path.clone();
            async move { listen(addr, &path, i, kind).await }
        })
        .buffered(64)
        .collect::<Vec<_>>()
        .await
        .into_iter()
        .collect()
}

#[cfg(test)]
mod tests {
    use super::Counter;

    #[test]
    fn marks_split_across_reads_are_counted_once() {
        let mut c = Counter::default();
        assert_eq!(c.feed(b"event: message\nda"), 0);
        assert_eq!(c.feed(b"ta: {}\n\nevent: message\ndata: {}\n\ndadata: "), 3);
    }
}
