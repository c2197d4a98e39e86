//! A small, real HTTP/1.1 client over `std::net::TcpStream` for the integration
//! tests: requests with exact headers, JSON replies, SSE streams read incrementally
//! (chunked decoding included), slow readers and abrupt disconnects.
#![allow(dead_code)]

pub mod counting;
pub mod fleet_notes;
pub mod legacy;
pub mod log_capture;
pub mod probe;
pub mod quiet;
// Uses genmcp's `redis` feature: every test build has it (the library's
// dev-dependency genmcp-cli enables it; the CLI's tests depend on it).
pub mod redis_server;
pub mod request_state;
pub mod serve_child;
pub mod signal;
pub mod sink;
pub use signal::signal_process;
pub mod stdio_child;
pub mod tasks;
pub mod user_server;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

pub const VERSION: &str = "2026-07-28";

/// The `genmcp` binary, for the tests that run it as a child process. Only
/// the command's own tests (`cli/tests/`, which share these helpers) have it:
/// cargo builds it for them.
pub fn genmcp_bin() -> &'static str {
    match option_env!("CARGO_BIN_EXE_genmcp") {
        Some(bin) => bin,
        None => panic!("a test that runs the genmcp binary lives in cli/tests/"),
    }
}

/// A server config for tests: a free loopback port, one worker.
pub fn config() -> genmcp::http::HttpConfig {
    let mut c = genmcp::http::HttpConfig::default();
    c.port = 0;
    c.workers = 1;
    c
}

/// `_meta` of a valid 2026-07-28 request.
pub fn meta() -> Value {
    json!({
        "io.modelcontextprotocol/protocolVersion": VERSION,
        "io.modelcontextprotocol/clientInfo": {"name": "genmcp-tests", "version": "0"},
        "io.modelcontextprotocol/clientCapabilities": {},
    })
}

/// A request body with `_meta` merged into `params`.
pub fn request(id: Value, method: &str, params: Value) -> Value {
    let mut params = params.as_object().cloned().unwrap_or_default();
    params.entry("_meta").or_insert_with(meta);
    json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params})
}

/// The standard headers for `method` (plus `Mcp-Name` when given).
pub fn headers(method: &str, name: Option<&str>) -> Vec<(String, String)> {
    let mut h = vec![
        ("Content-Type".to_owned(), "application/json".to_owned()),
        (
            "Accept".to_owned(),
            "application/json, text/event-stream".to_owned(),
        ),
        ("MCP-Protocol-Version".to_owned(), VERSION.to_owned()),
        ("Mcp-Method".to_owned(), method.to_owned()),
    ];
    if let Some(n) = name {
        h.push(("Mcp-Name".to_owned(), n.to_owned()));
    }
    h
}

pub struct Response {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Response {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.body).unwrap_or_else(|e| {
            panic!(
                "body is not JSON ({e}): {}",
                String::from_utf8_lossy(&self.body)
            )
        })
    }

    /// The JSON messages of an SSE body.
    pub fn sse_messages(&self) -> Vec<Value> {
        String::from_utf8_lossy(&self.body)
            .lines()
            .filter_map(|l| l.strip_prefix("data:"))
            .map(str::trim)
            // A 2025 stream's priming event has empty data.
            .filter(|d| !d.is_empty())
            .map(|d| serde_json::from_str(d).expect("SSE data is JSON"))
            .collect()
    }
}

enum Body {
    Chunked {
        left: usize,
        done: bool,
        started: bool,
    },
    Length(usize),
    UntilClose,
}

/// An open HTTP response whose body is read as it arrives.
pub struct Exchange {
    reader: BufReader<TcpStream>,
    pub status: u16,
    pub headers: Vec<(String, String)>,
    body: Body,
    line: String,
    /// The last SSE `id:` seen (a 2025 stream's resumption point).
    pub last_id: Option<String>,
    /// The last SSE `retry:` seen, in ms.
    pub retry: Option<u64>,
}

/// One SSE item.
#[derive(Debug, Clone, PartialEq)]
pub enum Event {
    Message(Value),
    Comment(String),
}

fn write_request(
    addr: SocketAddr,
    http_method: &str,
    path: &str,
    headers: &[(String, String)],
    body: &[u8],
) -> TcpStream {
    let mut stream = TcpStream::connect(addr).expect("connect");
    stream
        .set_read_timeout(Some(Duration::from_secs(20)))
        .unwrap();
    let mut head = format!("{http_method} {path} HTTP/1.1\r\n");
    if !headers.iter().any(|(k, _)| k.eq_ignore_ascii_case("host")) {
        head.push_str(&format!("Host: {addr}\r\n"));
    }
    for (k, v) in headers {
        head.push_str(&format!("{k}: {v}\r\n"));
    }
    head.push_str(&format!(
        "Content-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    ));
    stream.write_all(head.as_bytes()).unwrap();
    // The server may answer (and close) before reading a large body.
    let _ = stream.write_all(body);
    stream
}

impl Exchange {
    pub fn open(addr: SocketAddr, headers: &[(String, String)], body: &[u8]) -> Exchange {
        Self::open_with(addr, "POST", headers, body)
    }

    pub fn open_with(
        addr: SocketAddr,
        http_method: &str,
        headers: &[(String, String)],
        body: &[u8],
    ) -> Exchange {
        Self::open_at(addr, http_method, "/mcp", headers, body)
    }

    /// A request to `path` instead of `/mcp` (an endpoint mounted elsewhere,
    /// the application's own routes).
    pub fn open_at(
        addr: SocketAddr,
        http_method: &str,
        path: &str,
        headers: &[(String, String)],
        body: &[u8],
    ) -> Exchange {
        let stream = write_request(addr, http_method, path, headers, body);
        let mut reader = BufReader::new(stream);
        let (status, headers) = read_head(&mut reader);
        let find = |name: &str| {
            headers
                .iter()
                .find(|(k, _): &&(String, String)| k.eq_ignore_ascii_case(name))
                .map(|(_, v)| v.clone())
        };
        let body = if find("transfer-encoding").is_some_and(|v| v.eq_ignore_ascii_case("chunked")) {
            Body::Chunked {
                left: 0,
                done: false,
                started: false,
            }
        } else if let Some(len) = find("content-length") {
            Body::Length(len.parse().unwrap())
        } else {
            Body::UntilClose
        };
        Exchange {
            reader,
            status,
            headers,
            body,
            line: String::new(),
            last_id: None,
            retry: None,
        }
    }

    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    pub fn set_timeout(&self, t: Duration) {
        self.reader.get_ref().set_read_timeout(Some(t)).unwrap();
    }

    /// Reads some body bytes; `Ok(0)` at the end of the body.
    fn read_body(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        match &mut self.body {
            Body::Length(left) => {
                if *left == 0 {
                    return Ok(0);
                }
                let n = (*left).min(buf.len());
                let got = self.reader.read(&mut buf[..n])?;
                *left -= got;
                Ok(got)
            }
            Body::UntilClose => self.reader.read(buf),
            Body::Chunked {
                left,
                done,
                started,
            } => {
                if *done {
                    return Ok(0);
                }
                if *left == 0 {
                    if *started {
                        // The CRLF that ends the previous chunk's data.
                        let mut crlf = String::new();
                        self.reader.read_line(&mut crlf)?;
                    }
                    *started = true;
                    let mut size = String::new();
                    if self.reader.read_line(&mut size)? == 0 {
                        *done = true;
                        return Ok(0);
                    }
                    let hex = size.trim().split(';').next().unwrap_or("0");
                    *left = usize::from_str_radix(hex, 16).unwrap_or(0);
                    if *left == 0 {
                        *done = true;
                        return Ok(0);
                    }
                }
                let n = (*left).min(buf.len());
                let got = self.reader.read(&mut buf[..n])?;
                if got == 0 {
                    *done = true;
                }
                *left -= got;
                Ok(got)
            }
        }
    }

    /// Some raw body bytes (chunk framing removed); `0` at the end.
    pub fn read_raw(&mut self, buf: &mut [u8]) -> usize {
        self.read_body(buf).expect("reading body")
    }

    /// The rest of the body.
    pub fn read_to_end(&mut self) -> Vec<u8> {
        let mut out = Vec::new();
        let mut buf = [0u8; 8192];
        loop {
            match self.read_body(&mut buf) {
                Ok(0) => return out,
                Ok(n) => out.extend_from_slice(&buf[..n]),
                Err(e) => panic!("reading body: {e}"),
            }
        }
    }

    pub fn into_response(mut self) -> Response {
        let body = self.read_to_end();
        Response {
            status: self.status,
            headers: self.headers,
            body,
        }
    }

    fn body_line(&mut self) -> std::io::Result<Option<String>> {
        loop {
            if let Some(pos) = self.line.find('\n') {
                let line: String = self.line.drain(..=pos).collect();
                return Ok(Some(line.trim_end_matches(['\n', '\r']).to_owned()));
            }
            let mut buf = [0u8; 4096];
            let n = self.read_body(&mut buf)?;
            if n == 0 {
                return Ok(None);
            }
            self.line.push_str(&String::from_utf8_lossy(&buf[..n]));
        }
    }

    /// The next SSE item, `None` when the body ended. Panics on a read timeout.
    pub fn next_event(&mut self) -> Option<Event> {
        self.try_next_event().expect("SSE read timed out")
    }

    /// The next SSE item; `Err` on a read timeout, `Ok(None)` at the end.
    pub fn try_next_event(&mut self) -> std::io::Result<Option<Event>> {
        let mut data: Option<String> = None;
        loop {
            let Some(line) = self.body_line()? else {
                return Ok(None);
            };
            if line.is_empty() {
                // An event with empty data (a 2025 stream's priming event)
                // only moves the resumption point.
                if let Some(d) = data.take().filter(|d| !d.is_empty()) {
                    return Ok(Some(Event::Message(
                        serde_json::from_str(&d).expect("SSE data is JSON"),
                    )));
                }
                continue;
            }
            if let Some(c) = line.strip_prefix(':') {
                if data.is_none() {
                    // A comment stands alone between events.
                    let _ = self.body_line()?;
                    return Ok(Some(Event::Comment(c.trim().to_owned())));
                }
                continue;
            }
            if let Some(d) = line.strip_prefix("data:") {
                data = Some(d.strip_prefix(' ').unwrap_or(d).to_owned());
            } else if let Some(id) = line.strip_prefix("id:") {
                self.last_id = Some(id.trim().to_owned());
            } else if let Some(ms) = line.strip_prefix("retry:") {
                self.retry = ms.trim().parse().ok();
            }
        }
    }

    /// The next JSON message, skipping keep-alive comments.
    pub fn next_message(&mut self) -> Option<Value> {
        loop {
            match self.next_event()? {
                Event::Message(v) => return Some(v),
                Event::Comment(_) => continue,
            }
        }
    }

    /// Closes the connection abruptly (the client goes away).
    pub fn disconnect(self) {
        let _ = self.reader.get_ref().shutdown(Shutdown::Both);
    }
}

/// POSTs and reads the whole response.
pub fn post(addr: SocketAddr, headers: &[(String, String)], body: &Value) -> Response {
    Exchange::open(addr, headers, body.to_string().as_bytes()).into_response()
}

/// POSTs raw bytes and reads the whole response.
pub fn post_raw(addr: SocketAddr, headers: &[(String, String)], body: &[u8]) -> Response {
    Exchange::open(addr, headers, body).into_response()
}

/// Sends a well-formed request for `method` and reads the whole response.
pub fn call(addr: SocketAddr, id: Value, method: &str, params: Value) -> Response {
    let name = params
        .get("name")
        .or_else(|| params.get("uri"))
        .and_then(Value::as_str)
        .filter(|_| matches!(method, "tools/call" | "prompts/get" | "resources/read"))
        .map(str::to_owned);
    post(
        addr,
        &headers(method, name.as_deref()),
        &request(id, method, params),
    )
}

/// Opens a listen stream.
pub fn listen(addr: SocketAddr, id: Value, notifications: Value) -> Exchange {
    let body = request(
        id,
        "subscriptions/listen",
        json!({"notifications": notifications}),
    );
    Exchange::open(
        addr,
        &headers("subscriptions/listen", None),
        body.to_string().as_bytes(),
    )
}

/// Whether the process in `slot` has exited; it is taken out of `slot`
/// then (a server that could not bind its port, say).
pub fn take_if_exited(slot: &mut Option<std::process::Child>) -> bool {
    let exited = slot
        .as_mut()
        .is_some_and(|c| matches!(c.try_wait(), Ok(Some(_))));
    if exited {
        *slot = None;
    }
    exited
}

/// Polls `f` every 10 ms until it is true or `timeout` passes.
pub fn wait_until(timeout: Duration, mut f: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + timeout;
    loop {
        if f() {
            return true;
        }
        if Instant::now() > deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Reads an HTTP/1.1 response's status line and headers (names as sent).
pub fn read_head(reader: &mut BufReader<TcpStream>) -> (u16, Vec<(String, String)>) {
    let mut status_line = String::new();
    reader.read_line(&mut status_line).expect("status line");
    let status: u16 = status_line
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("bad status line {status_line:?}"));
    let mut headers = Vec::new();
    loop {
        let mut line = String::new();
        reader.read_line(&mut line).expect("header line");
        let line = line.trim_end();
        if line.is_empty() {
            break;
        }
        if let Some((k, v)) = line.split_once(':') {
            headers.push((k.trim().to_owned(), v.trim().to_owned()));
        }
    }
    (status, headers)
}
