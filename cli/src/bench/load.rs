//! The load generator: real loopback HTTP/1.1 clients, the same for every
//! server it drives. Listens are raw sockets whose SSE events are counted as
//! they arrive ([`FrameCounter`]: a SIMD search for `\ndata:`, no JSON
//! parsing); `burst` is an ordinary `tools/call`; a [`Session`] sends
//! request after request on one keep-alive connection (the tasks mode).
//!
//! What keeps the client far above what a server sends: each listen is a
//! task that waits for its socket to be readable and then drains it with
//! `try_read` into its thread's one 256 KiB buffer (no buffer per connection,
//! no timer per read: a stalled run is caught by the caller watching
//! [`Progress`]), on a runtime with as many threads as asked
//! (`BenchConfig::client_threads`).

use std::cell::RefCell;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use super::Kind;
use super::counter::FrameCounter;
use super::source;

const PROTOCOL: &str = "2026-07-28";
/// The URI every stream subscribes to in the `resources` scenario.
pub const BENCH_URI: &str = "note://bench";
/// Each client thread's read buffer.
const READ_BUFFER: usize = 256 * 1024;

thread_local! {
    static BUFFER: RefCell<Vec<u8>> = RefCell::new(vec![0; READ_BUFFER]);
}

fn io_err(msg: impl Into<String>) -> std::io::Error {
    std::io::Error::other(msg.into())
}

fn meta() -> Value {
    json!({"io.modelcontextprotocol/protocolVersion": PROTOCOL,
           "io.modelcontextprotocol/clientCapabilities": {}})
}

/// The tasks extension.
pub const TASKS_EXTENSION: &str = "io.modelcontextprotocol/tasks";

/// `_meta` of a request that declares the tasks extension.
pub fn tasks_meta() -> Value {
    json!({"io.modelcontextprotocol/protocolVersion": PROTOCOL,
           "io.modelcontextprotocol/clientCapabilities": {"extensions": {TASKS_EXTENSION: {}}}})
}

/// What the client has done so far, shared with whoever watches it (the
/// stall check, the progress line).
#[derive(Debug, Default)]
pub struct Progress {
    /// Listens acknowledged.
    pub opened: AtomicU64,
    /// Events counted on every stream together.
    pub frames: AtomicU64,
}

impl Progress {
    /// A fresh, shared counter.
    pub fn shared() -> Arc<Progress> {
        Arc::new(Progress::default())
    }
}

/// A whole `POST` request: the MCP headers (`Mcp-Name` when given) and `body`.
fn request(addr: SocketAddr, path: &str, body: &Value, method: &str, name: Option<&str>) -> String {
    let body = body.to_string();
    let name = name
        .map(|n| format!("Mcp-Name: {n}\r\n"))
        .unwrap_or_default();
    format!(
        "POST {path} HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\n\
         Accept: application/json, text/event-stream\r\nMCP-Protocol-Version: {PROTOCOL}\r\n\
         Mcp-Method: {method}\r\n{name}Content-Length: {}\r\n\r\n{body}",
        body.len()
    )
}

async fn post(
    addr: SocketAddr,
    path: &str,
    body: &Value,
    method: &str,
    name: Option<&str>,
) -> std::io::Result<TcpStream> {
    let mut s = source::connect(addr).await?;
    s.write_all(request(addr, path, body, method, name).as_bytes())
        .await?;
    Ok(s)
}

/// The longest a [`Session`] waits for one answer.
const ANSWER_TIMEOUT: Duration = Duration::from_secs(60);

/// One keep-alive HTTP/1.1 connection that sends request after request and
/// reads each answer (a JSON body with `Content-Length`, as genmcp answers
/// every request but a listen).
pub struct Session {
    socket: TcpStream,
    addr: SocketAddr,
    path: String,
    /// Bytes read past the last answer.
    buf: Vec<u8>,
}

/// Where the blank line after the head of an answer ends, if it is in `buf`.
fn head_end(buf: &[u8]) -> Option<usize> {
    buf.windows(4).position(|w| w == b"\r\n\r\n").map(|i| i + 4)
}

/// The status code and `Content-Length` of an answer's head.
fn parse_head(head: &[u8]) -> std::io::Result<(u16, usize)> {
    let head = std::str::from_utf8(head).map_err(|_| io_err("answer head is not UTF-8"))?;
    let mut lines = head.split("\r\n");
    let status = lines
        .next()
        .and_then(|l| l.split(' ').nth(1))
        .and_then(|c| c.parse().ok())
        .ok_or_else(|| io_err(format!("bad status line in {head:?}")))?;
    let mut length = None;
    for line in lines {
        let Some((key, value)) = line.split_once(':') else {
            continue;
        };
        if key.eq_ignore_ascii_case("content-length") {
            length = value.trim().parse().ok();
        } else if key.eq_ignore_ascii_case("transfer-encoding") {
            return Err(io_err(format!(
                "a streamed answer where JSON was expected: {head:?}"
            )));
        }
    }
    let length = length.ok_or_else(|| io_err(format!("no Content-Length in {head:?}")))?;
    Ok((status, length))
}

impl Session {
    /// Connects to the MCP endpoint `path` of `addr` (from the loopback
    /// source address [`source::connect`] picks: sessions opened together
    /// share one, so one principal).
    pub async fn open(addr: SocketAddr, path: &str) -> std::io::Result<Session> {
        Ok(Session {
            socket: source::connect(addr).await?,
            addr,
            path: path.to_owned(),
            buf: Vec::with_capacity(4096),
        })
    }

    /// Sends `body` as `method` (with `Mcp-Name: name` when given); the
    /// answer's HTTP status and JSON body.
    pub async fn call(
        &mut self,
        body: &Value,
        method: &str,
        name: Option<&str>,
    ) -> std::io::Result<(u16, Value)> {
        let req = request(self.addr, &self.path, body, method, name);
        self.socket.write_all(req.as_bytes()).await?;
        tokio::time::timeout(ANSWER_TIMEOUT, self.answer())
            .await
            .map_err(|_| io_err(format!("{method}: no answer within 60 s")))?
    }

    async fn answer(&mut self) -> std::io::Result<(u16, Value)> {
        let mut chunk = [0u8; 8192];
        let (status, start, end) = loop {
            if let Some(at) = head_end(&self.buf) {
                let (status, length) = parse_head(&self.buf[..at])?;
                if self.buf.len() >= at + length {
                    break (status, at, at + length);
                }
            }
            let n = self.socket.read(&mut chunk).await?;
            if n == 0 {
                return Err(io_err("the server closed the connection"));
            }
            self.buf.extend_from_slice(&chunk[..n]);
        };
        let body = serde_json::from_slice(&self.buf[start..end])
            .map_err(|e| io_err(format!("answer is not JSON: {e}")))?;
        self.buf.drain(..end);
        Ok((status, body))
    }
}

/// An open listen stream whose acknowledgement has arrived.
pub struct Listen {
    socket: TcpStream,
    counter: FrameCounter,
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
    let mut counter = FrameCounter::default();
    let mut buf = [0u8; 2048];
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

/// Arrival times of one stream's events, in microseconds since a common
/// epoch (latency mode); empty when not asked for.
pub type Arrivals = Vec<u32>;

impl Listen {
    /// Reads until `want` events arrived, adding each read's count to
    /// `progress`. With `epoch`, returns each event's arrival time since it.
    pub async fn receive(
        mut self,
        want: usize,
        epoch: Option<Instant>,
        progress: Arc<Progress>,
    ) -> std::io::Result<Arrivals> {
        self.receive_more(want, epoch, progress).await
    }

    /// [`Listen::receive`] keeping the stream open: reads until `want` more
    /// events arrived (memory mode reads a burst, then leaves the stream idle).
    pub async fn receive_more(
        &mut self,
        want: usize,
        epoch: Option<Instant>,
        progress: Arc<Progress>,
    ) -> std::io::Result<Arrivals> {
        let mut times = Vec::with_capacity(if epoch.is_some() { want } else { 0 });
        let mut seen = self.extra.min(want);
        self.extra -= seen;
        let stamp = |times: &mut Arrivals, n: usize| {
            if let Some(epoch) = epoch {
                let at = u32::try_from(epoch.elapsed().as_micros()).unwrap_or(u32::MAX);
                times.extend(std::iter::repeat_n(at, n));
            }
        };
        stamp(&mut times, seen);
        progress.frames.fetch_add(seen as u64, Ordering::Relaxed);
        while seen < want {
            self.socket.readable().await?;
            // Drain what is there into this thread's buffer; nothing is held
            // across the await above.
            let got = BUFFER.with_borrow_mut(|buf| -> std::io::Result<usize> {
                let mut got = 0;
                loop {
                    match self.socket.try_read(buf) {
                        Ok(0) => {
                            return Err(io_err(format!(
                                "stream ended after {} of {want} frames",
                                seen + got
                            )));
                        }
                        Ok(n) => {
                            got += self.counter.feed(&buf[..n]);
                            if n < buf.len() {
                                return Ok(got);
                            }
                        }
                        Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => return Ok(got),
                        Err(e) => return Err(e),
                    }
                }
            })?;
            // Events past `want` (none from the bench's own servers) count
            // towards the next call.
            self.extra += got.saturating_sub(want - seen);
            let got = got.min(want - seen);
            if got > 0 {
                stamp(&mut times, got);
                progress.frames.fetch_add(got as u64, Ordering::Relaxed);
                seen += got;
            }
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

/// Listens set up at once while opening many.
const OPENING_AT_ONCE: usize = 128;

/// Opens `n` listens, at most 128 being set up at a time,
/// counting each in `progress`.
pub async fn open_many(
    addr: SocketAddr,
    path: &str,
    n: usize,
    kind: Kind,
    progress: &Progress,
) -> std::io::Result<Vec<Listen>> {
    use futures_util::StreamExt as _;
    let mut opening = futures_util::stream::iter(0..n)
        .map(|i| listen(addr, path, i, kind))
        .buffered(OPENING_AT_ONCE);
    let mut all = Vec::with_capacity(n);
    while let Some(listen) = opening.next().await {
        all.push(listen?);
        progress.opened.fetch_add(1, Ordering::Relaxed);
    }
    Ok(all)
}
