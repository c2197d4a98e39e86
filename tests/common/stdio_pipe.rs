//! The in-process stdio pipe of `tests/final_frame_stdio.rs`: `serve_io` over
//! a real in-memory duplex pipe whose reading end the test controls (a gate
//! that holds, opens or fails the writer), a transcript of every line read,
//! and the scripted handler's record. Loaded with `#[path]` by the stdio
//! test files that drive the scripted handler.
#![allow(dead_code)]

use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

use genmcp::prelude::*;
use genmcp::runtime::Server;
use genmcp::transport::stdio::{StdioConfig, serve_io};
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWrite, AsyncWriteExt};

use crate::common;
use crate::scripted::{self, CapsHook, Cmd, Record, Then, is_final_for, is_for, sub_id};

/// Padding per notification: a frame is ~450 bytes, more than the pipe holds.
pub(crate) const PAD: usize = 300;
/// Bytes the duplex pipe buffers: less than one padded frame.
pub(crate) const PIPE_BYTES: usize = 256;
/// A bound for liveness checks (never a performance assertion).
pub(crate) const BOUND: Duration = Duration::from_secs(10);

pub(crate) fn limits(outbox: usize, spill: usize, stall: Duration) -> Limits {
    let mut l = Limits::default();
    l.outbox_capacity = outbox;
    l.spill_limit = spill;
    l.stall_timeout = stall;
    l
}

pub(crate) const HOLD: u8 = 0;
pub(crate) const OPEN: u8 = 1;
pub(crate) const FAIL: u8 = 2;

/// Controls the server's stdout: held (writes wait), open, or failed (stdout
/// closed under the server).
pub(crate) struct Gate {
    pub(crate) state: AtomicU8,
    pub(crate) waker: Mutex<Option<Waker>>,
    pub(crate) waiting: AtomicBool,
}

impl Gate {
    pub(crate) fn new(state: u8) -> Arc<Gate> {
        Arc::new(Gate {
            state: AtomicU8::new(state),
            waker: Mutex::new(None),
            waiting: AtomicBool::new(false),
        })
    }

    /// Opens stdout again (wakes a held write) and forgets the last wait.
    pub(crate) fn open(&self) {
        self.state.store(OPEN, Ordering::SeqCst);
        if let Some(w) = self.waker.lock().unwrap().take() {
            w.wake();
        }
    }

    /// Holds writes from now on.
    pub(crate) fn hold(&self) {
        self.waiting.store(false, Ordering::SeqCst);
        self.state.store(HOLD, Ordering::SeqCst);
    }

    pub(crate) fn fail(&self) {
        self.state.store(FAIL, Ordering::SeqCst);
        if let Some(w) = self.waker.lock().unwrap().take() {
            w.wake();
        }
    }
}

pub(crate) struct GateWriter<W> {
    pub(crate) inner: W,
    pub(crate) gate: Arc<Gate>,
}

impl<W: AsyncWrite + Unpin> GateWriter<W> {
    pub(crate) fn check(&self, cx: &mut Context<'_>) -> Option<Poll<io::Result<()>>> {
        match self.gate.state.load(Ordering::SeqCst) {
            OPEN => None,
            FAIL => Some(Poll::Ready(Err(io::ErrorKind::BrokenPipe.into()))),
            _ => {
                *self.gate.waker.lock().unwrap() = Some(cx.waker().clone());
                self.gate.waiting.store(true, Ordering::SeqCst);
                if self.gate.state.load(Ordering::SeqCst) == HOLD {
                    Some(Poll::Pending)
                } else {
                    cx.waker().wake_by_ref();
                    Some(Poll::Pending)
                }
            }
        }
    }
}

impl<W: AsyncWrite + Unpin> AsyncWrite for GateWriter<W> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        if let Some(p) = self.check(cx) {
            return p.map(|r| r.map(|()| 0));
        }
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        if let Some(p) = self.check(cx) {
            return p;
        }
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

pub(crate) type Lines =
    tokio::io::Lines<tokio::io::BufReader<tokio::io::ReadHalf<tokio::io::DuplexStream>>>;

/// `serve_io` with a scripted handler over a duplex pipe.
pub(crate) struct Pipe {
    pub(crate) bus: Bus<Cmd>,
    pub(crate) record: Arc<Record>,
    pub(crate) server: Server,
    pub(crate) task: Option<tokio::task::JoinHandle<io::Result<()>>>,
    pub(crate) lines: Lines,
    pub(crate) write: tokio::io::WriteHalf<tokio::io::DuplexStream>,
    /// Every line read so far, parsed.
    pub(crate) transcript: Vec<Value>,
    /// Every line read so far, as text.
    pub(crate) raw: Vec<String>,
}

impl Pipe {
    pub(crate) fn start(limits: Limits) -> Pipe {
        Pipe::start_with(limits, Gate::new(OPEN), None)
    }

    pub(crate) fn start_with(limits: Limits, gate: Arc<Gate>, hook: Option<CapsHook>) -> Pipe {
        let bus: Bus<Cmd> = Bus::new();
        let record = Arc::new(Record::default());
        let suite = scripted::suite(bus.clone(), record.clone(), hook);
        let mut config = StdioConfig::default();
        config.limits = limits;
        let (client, server_end) = tokio::io::duplex(PIPE_BYTES);
        let (server_read, server_write) = tokio::io::split(server_end);
        let server = Server::new(config.limits.clone());
        let writer = GateWriter {
            inner: server_write,
            gate,
        };
        let task = actix_rt::spawn({
            let server = server.clone();
            async move { serve_io(suite, server, &config, server_read, writer).await }
        });
        let (read, write) = tokio::io::split(client);
        Pipe {
            bus,
            record,
            server,
            task: Some(task),
            lines: tokio::io::BufReader::new(read).lines(),
            write,
            transcript: Vec::new(),
            raw: Vec::new(),
        }
    }

    pub(crate) async fn send(&mut self, v: &Value) {
        self.write
            .write_all(format!("{v}\n").as_bytes())
            .await
            .unwrap();
    }

    pub(crate) async fn listen(&mut self, id: Value, notifications: Value) {
        self.send(&common::request(
            id,
            "subscriptions/listen",
            json!({"notifications": notifications}),
        ))
        .await;
    }

    pub(crate) async fn cancel(&mut self, id: Value) {
        self.send(
            &json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": id}}),
        )
        .await;
    }

    /// The next line, or `None` at the end of stdout.
    pub(crate) async fn try_next(&mut self) -> Option<Value> {
        let line = tokio::time::timeout(BOUND, self.lines.next_line())
            .await
            .expect("a line (or the end of stdout) in time")
            .expect("stdout readable")?;
        let v: Value = serde_json::from_str(&line)
            .unwrap_or_else(|e| panic!("stdout line is not JSON ({e}): {line}"));
        self.raw.push(line);
        self.transcript.push(v.clone());
        Some(v)
    }

    pub(crate) async fn next(&mut self) -> Value {
        self.try_next().await.expect("stdout is open")
    }

    pub(crate) async fn until(&mut self, f: impl Fn(&Value) -> bool) -> Value {
        loop {
            let v = self.next().await;
            if f(&v) {
                return v;
            }
        }
    }

    /// Reads the acknowledgement of `id`.
    pub(crate) async fn acked(&mut self, id: &Value) {
        let ack = self.next().await;
        assert_eq!(ack["method"], "notifications/subscriptions/acknowledged");
        assert_eq!(sub_id(&ack), id);
    }

    /// Waits (bounded) until `f` holds.
    pub(crate) async fn wait(&self, what: &str, f: impl Fn(&Pipe) -> bool) {
        let deadline = Instant::now() + BOUND;
        while !f(self) {
            assert!(Instant::now() < deadline, "timed out waiting for {what}");
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }

    pub(crate) fn handled(&self) -> usize {
        self.record.handled.load(Ordering::SeqCst)
    }

    pub(crate) fn closed(&self, reason: CloseReason) -> u64 {
        self.server.metrics().closed(reason)
    }

    /// Reads stdout to its end and waits for `serve_io` to return.
    pub(crate) async fn drain(&mut self) -> io::Result<()> {
        while self.try_next().await.is_some() {}
        tokio::time::timeout(BOUND, self.task.take().expect("running"))
            .await
            .expect("serve_io returns in time")
            .expect("serve_io did not panic")
    }

    /// Closes stdin, reads stdout to its end, waits for `serve_io`.
    pub(crate) async fn finish(&mut self) {
        self.write.shutdown().await.unwrap();
        self.drain().await.expect("serve_io ends cleanly");
    }
}

pub(crate) fn burst(to: &str, n: usize, then: Then) -> Cmd {
    Cmd::Burst {
        to: Some(RequestId::from(to)),
        n,
        pad: PAD,
        then,
    }
}

/// Frames for `id` in a transcript never follow its final frame, and there is
/// at most one.
pub(crate) fn at_most_one_final(transcript: &[Value], id: &Value) {
    let mine: Vec<&Value> = transcript.iter().filter(|v| is_for(v, id)).collect();
    let finals = mine.iter().filter(|v| is_final_for(v, id)).count();
    assert!(finals <= 1, "{mine:#?}");
    if finals == 1 {
        assert!(is_final_for(mine[mine.len() - 1], id), "{mine:#?}");
    }
}

/// `seqs` is 0, 1, 2, ... (in order, nothing lost in between, no duplicate).
pub(crate) fn is_prefix(seqs: &[u64]) -> bool {
    seqs.iter().enumerate().all(|(i, s)| *s == i as u64)
}
