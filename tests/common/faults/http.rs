//! A blocking HTTP/1.1 client for the workload that never panics on what the
//! network does: a refused connection is [`HttpError::Refused`] (nothing was
//! sent), anything later is [`HttpError::Cut`] (it may have been applied).
//! One request per connection (`Connection: close`), as the proxy expects.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpStream};
use std::time::Duration;

use serde_json::Value;

use super::history::Outcome;

/// Why a request got no answer.
#[derive(Debug)]
pub enum HttpError {
    /// The connection was refused: the request was never sent.
    Refused(std::io::Error),
    /// The connection broke or timed out after the request may have been sent.
    Cut(std::io::Error),
}

impl HttpError {
    /// The outcome it means for the operation.
    pub fn outcome(&self) -> Outcome {
        match self {
            HttpError::Refused(_) => Outcome::Failed,
            HttpError::Cut(_) => Outcome::Unknown,
        }
    }
}

impl std::fmt::Display for HttpError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            HttpError::Refused(e) => write!(f, "refused: {e}"),
            HttpError::Cut(e) => write!(f, "cut: {e}"),
        }
    }
}

/// A whole response.
#[derive(Debug, Clone)]
pub struct Reply {
    /// The HTTP status.
    pub status: u16,
    /// The headers, names as sent.
    pub headers: Vec<(String, String)>,
    /// The body.
    pub body: Vec<u8>,
}

fn find<'a>(headers: &'a [(String, String)], name: &str) -> Option<&'a str> {
    headers
        .iter()
        .find(|(k, _)| k.eq_ignore_ascii_case(name))
        .map(|(_, v)| v.as_str())
}

impl Reply {
    /// A header's value.
    pub fn header(&self, name: &str) -> Option<&str> {
        find(&self.headers, name)
    }

    /// The JSON-RPC response in the body: plain JSON, or the SSE message
    /// carrying an `id` (the last one); `Null` when there is none.
    pub fn message(&self) -> Value {
        let text = String::from_utf8_lossy(&self.body);
        if self
            .header("content-type")
            .is_some_and(|c| c.starts_with("text/event-stream"))
        {
            return text
                .lines()
                .filter_map(|l| l.strip_prefix("data:"))
                .filter_map(|d| serde_json::from_str::<Value>(d.trim()).ok())
                .rfind(|m| m.get("id").is_some())
                .unwrap_or(Value::Null);
        }
        serde_json::from_str(&text).unwrap_or(Value::Null)
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

/// An item of an SSE body.
#[derive(Debug, Clone, PartialEq)]
pub enum Item {
    /// A JSON message (`data:`), or `Null` when it was not JSON.
    Message(Value),
    /// A comment (a keep-alive).
    Comment,
}

/// A response whose body is read as it arrives (an SSE stream).
pub struct Stream {
    reader: BufReader<TcpStream>,
    /// The HTTP status.
    pub status: u16,
    /// The headers.
    pub headers: Vec<(String, String)>,
    body: Body,
    pending: String,
    /// The local port of the connection (the proxy's log names its upstream).
    pub local_port: u16,
}

fn cut(e: std::io::Error) -> HttpError {
    HttpError::Cut(e)
}

/// Sends a request and reads the response head; the body stays to be read.
pub fn open(
    addr: SocketAddr,
    method: &str,
    headers: &[(String, String)],
    body: &[u8],
    timeout: Duration,
) -> Result<Stream, HttpError> {
    let mut tcp =
        TcpStream::connect_timeout(&addr, Duration::from_secs(2)).map_err(HttpError::Refused)?;
    let local_port = tcp.local_addr().map(|a| a.port()).unwrap_or(0);
    tcp.set_read_timeout(Some(timeout)).map_err(cut)?;
    tcp.set_write_timeout(Some(timeout)).map_err(cut)?;
    let mut head = format!("{method} /mcp HTTP/1.1\r\nHost: {addr}\r\n");
    for (k, v) in headers {
        head.push_str(&format!("{k}: {v}\r\n"));
    }
    head.push_str(&format!(
        "Content-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    ));
    tcp.write_all(head.as_bytes()).map_err(cut)?;
    tcp.write_all(body).map_err(cut)?;
    let mut reader = BufReader::new(tcp);
    let mut status_line = String::new();
    if reader.read_line(&mut status_line).map_err(cut)? == 0 {
        return Err(cut(std::io::Error::new(
            std::io::ErrorKind::UnexpectedEof,
            "closed before the status line",
        )));
    }
    let status: u16 = status_line
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| {
            cut(std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                format!("bad status line {status_line:?}"),
            ))
        })?;
    let mut headers = Vec::new();
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).map_err(cut)? == 0 {
            break;
        }
        let line = line.trim_end();
        if line.is_empty() {
            break;
        }
        if let Some((k, v)) = line.split_once(':') {
            headers.push((k.trim().to_owned(), v.trim().to_owned()));
        }
    }
    let body =
        if find(&headers, "transfer-encoding").is_some_and(|v| v.eq_ignore_ascii_case("chunked")) {
            Body::Chunked {
                left: 0,
                done: false,
                started: false,
            }
        } else if let Some(len) = find(&headers, "content-length").and_then(|v| v.parse().ok()) {
            Body::Length(len)
        } else {
            Body::UntilClose
        };
    Ok(Stream {
        reader,
        status,
        headers,
        body,
        pending: String::new(),
        local_port,
    })
}

/// Sends a request and reads the whole response.
pub fn send(
    addr: SocketAddr,
    method: &str,
    headers: &[(String, String)],
    body: &[u8],
    timeout: Duration,
) -> Result<(Reply, u16), HttpError> {
    let mut s = open(addr, method, headers, body, timeout)?;
    let body = s.read_to_end().map_err(cut)?;
    Ok((
        Reply {
            status: s.status,
            headers: s.headers,
            body,
        },
        s.local_port,
    ))
}

impl Stream {
    /// A header's value.
    pub fn header(&self, name: &str) -> Option<&str> {
        find(&self.headers, name)
    }

    /// A handle that closes the connection from another thread.
    pub fn closer(&self) -> Option<TcpStream> {
        self.reader.get_ref().try_clone().ok()
    }

    /// Sets how long one read may wait.
    pub fn set_timeout(&self, t: Duration) {
        let _ = self.reader.get_ref().set_read_timeout(Some(t));
    }

    fn read_body(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        match &mut self.body {
            Body::Length(left) => {
                if *left == 0 {
                    return Ok(0);
                }
                let n = (*left).min(buf.len());
                let got = self.reader.read(&mut buf[..n])?;
                *left -= got;
                if got == 0 {
                    *left = 0;
                }
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

    /// The rest of the body.
    pub fn read_to_end(&mut self) -> std::io::Result<Vec<u8>> {
        let mut out = self.pending.as_bytes().to_vec();
        self.pending.clear();
        let mut buf = [0u8; 8192];
        loop {
            match self.read_body(&mut buf)? {
                0 => return Ok(out),
                n => out.extend_from_slice(&buf[..n]),
            }
        }
    }

    fn line(&mut self) -> std::io::Result<Option<String>> {
        loop {
            if let Some(pos) = self.pending.find('\n') {
                let line: String = self.pending.drain(..=pos).collect();
                return Ok(Some(line.trim_end_matches(['\n', '\r']).to_owned()));
            }
            let mut buf = [0u8; 4096];
            let n = self.read_body(&mut buf)?;
            if n == 0 {
                return Ok(None);
            }
            self.pending.push_str(&String::from_utf8_lossy(&buf[..n]));
        }
    }

    /// The next SSE item; `Ok(None)` at the end of the body; `Err` on a
    /// timeout or a broken connection.
    pub fn next_item(&mut self) -> std::io::Result<Option<Item>> {
        let mut data: Option<String> = None;
        loop {
            let Some(line) = self.line()? else {
                return Ok(None);
            };
            if line.is_empty() {
                if let Some(d) = data.take() {
                    return Ok(Some(Item::Message(
                        serde_json::from_str(&d).unwrap_or(Value::Null),
                    )));
                }
                continue;
            }
            if line.starts_with(':') {
                if data.is_none() {
                    return Ok(Some(Item::Comment));
                }
                continue;
            }
            if let Some(d) = line.strip_prefix("data:") {
                data = Some(d.trim_start().to_owned());
            }
        }
    }

    /// Closes the connection.
    pub fn close(self) {
        let _ = self.reader.get_ref().shutdown(Shutdown::Both);
    }
}
