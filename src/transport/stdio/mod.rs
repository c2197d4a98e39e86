//! The stdio transport: newline-delimited JSON-RPC on stdin and stdout.
//!
//! The client's first request decides the era of the pipe: an `initialize`
//! (without a 2026-07-28 `_meta` version) makes it a 2025-era session, served
//! by its `legacy` module through the transport-independent compatibility layer
//! (`crate::compat`); any other request makes it a 2026-07-28 pipe, as below.
//!
//! 2026-07-28: one [`Connection`] supervisor carries every listen stream of the pipe,
//! multiplexed by subscription id; `notifications/cancelled` ends a listen (no
//! completion result) or aborts an in-flight request (no response); stdin EOF
//! tears everything down (`handle_close` runs); a graceful shutdown sends every
//! open stream its completion result first.
//!
//! All output goes through one writer task, so lines never interleave; ready
//! frames are written together and flushed once.

use std::cell::RefCell;
use std::collections::HashMap;
use std::io;
use std::rc::Rc;
use std::time::{Duration, Instant};

use actix::prelude::*;
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncWrite, BufReader};
use tokio::task::AbortHandle;

mod legacy;
mod writer;

use writer::write_frames;

use super::dispatch::{
    Deadlines, ListenRequest, Origin, Routed, route, unary_future, validate_meta,
};
use crate::mux::{Assigns, Frame, Outbox, outbox};
use crate::protocol::jsonrpc::encode_error;
use crate::protocol::{Incoming, McpError, Request, RequestId, methods};
use crate::runtime::{
    CancelStream, CloseTransport, Connection, HoldsId, Limits, NetworkTransport, Operation,
    Refusal, Refused, RequestOutcome, Server, method_label, spawn_listen,
};
use crate::subscription::SubscriptionHandler;
use crate::suite::Suite;

/// Configuration of the stdio transport.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct StdioConfig {
    /// Runtime limits (the outbox bound is the stdout queue).
    pub limits: Limits,
    /// Longest accepted input line (default 4 MiB); a longer line is answered
    /// with `-32600` and skipped.
    pub max_line: usize,
    /// Unary requests in flight at once (default 1,024); past it `-32603`.
    pub max_in_flight: usize,
    /// How long a unary request's handler may run (default 60 s); past it the
    /// handler's future is dropped and the client gets `-32603` "Request timed
    /// out".
    pub request_timeout: Duration,
    /// How long teardown waits for streams and output to finish (default 5 s).
    pub drain_timeout: Duration,
    /// Serve 2025-era clients (an `initialize` as the first request; default
    /// true). `false` answers it `-32022` naming the served version.
    pub compat: bool,
    /// Server-to-client requests (elicitation, sampling, roots) of a 2025
    /// session waiting for the client's answer at once (default 64); past it
    /// the request that asks gets `-32603`.
    pub max_pending_inputs: usize,
}

impl Default for StdioConfig {
    fn default() -> Self {
        StdioConfig {
            limits: Limits::default(),
            max_line: 4 * 1024 * 1024,
            max_in_flight: 1_024,
            request_timeout: Duration::from_secs(60),
            drain_timeout: Duration::from_secs(5),
            compat: true,
            max_pending_inputs: 64,
        }
    }
}

/// Serves `suite` on stdin/stdout until stdin closes or SIGINT/SIGTERM (then
/// running tasks get `drain_timeout` to finish, those still running end
/// `failed`, and open streams get their completion result).
pub async fn serve<H: SubscriptionHandler>(suite: Suite<H>, config: StdioConfig) -> io::Result<()> {
    let server = Server::new(config.limits.clone());
    let signals = server.clone();
    let tasks = suite.task_supervisor();
    let drain_timeout = config.drain_timeout;
    actix_rt::spawn(async move {
        super::http::shutdown_signal().await;
        // Tasks first: those still running at the deadline end `failed`, and
        // the listens watching them hear it before their streams complete.
        if tasks.running() > 0 {
            tracing::info!("shutting down: finishing running tasks");
        }
        tasks.drain(drain_timeout).await;
        tracing::info!("shutting down: completing open streams");
        signals.shutdown();
    });
    serve_io(
        suite,
        server,
        &config,
        tokio::io::stdin(),
        tokio::io::stdout(),
    )
    .await
}

enum Line {
    Text(Vec<u8>),
    TooLong,
}

/// Reads newline-terminated lines of at most `max` bytes.
struct Lines<R> {
    reader: BufReader<R>,
    max: usize,
}

impl<R: AsyncRead + Unpin> Lines<R> {
    async fn next(&mut self) -> io::Result<Option<Line>> {
        let mut line = Vec::new();
        let mut too_long = false;
        loop {
            let buf = self.reader.fill_buf().await?;
            if buf.is_empty() {
                // EOF: an unterminated last line still counts.
                return Ok(match (too_long, line.is_empty()) {
                    (true, _) => Some(Line::TooLong),
                    (false, true) => None,
                    (false, false) => Some(Line::Text(line)),
                });
            }
            let (chunk, done) = match buf.iter().position(|b| *b == b'\n') {
                Some(i) => (&buf[..i], Some(i + 1)),
                None => (buf, None),
            };
            if !too_long {
                if line.len() + chunk.len() > self.max {
                    too_long = true;
                    line = Vec::new();
                } else {
                    line.extend_from_slice(chunk);
                }
            }
            let used = done.unwrap_or(buf.len());
            self.reader.consume(used);
            if done.is_some() {
                return Ok(Some(if too_long {
                    Line::TooLong
                } else {
                    Line::Text(line)
                }));
            }
        }
    }
}

/// Writes an error response. The outbox is bounded: this waits for room, at most
/// `stall` (`Limits::stall_timeout`); a peer that stopped reading loses the reply
/// instead of stalling the read loop (and with it, shutdown).
async fn send_error(outbox: &Outbox, stall: Duration, id: Option<&RequestId>, error: &McpError) {
    send_reply(outbox, stall, encode_error(id, error)).await;
}

/// Writes a response (waiting for outbox room at most `stall`, as
/// [`send_error`]).
async fn send_reply(outbox: &Outbox, stall: Duration, bytes: Vec<u8>) {
    if tokio::time::timeout(stall, outbox.send(Frame::last(bytes)))
        .await
        .is_err()
    {
        tracing::debug!("reply dropped: stdout stayed full past the stall timeout");
    }
}

/// Unary requests in flight, by id, so a cancel can abort them.
#[derive(Clone, Default)]
struct InFlight {
    map: Rc<RefCell<HashMap<RequestId, (u64, AbortHandle)>>>,
    next: Rc<RefCell<u64>>,
}

impl InFlight {
    fn len(&self) -> usize {
        self.map.borrow().len()
    }

    fn contains(&self, id: &RequestId) -> bool {
        self.map.borrow().contains_key(id)
    }

    fn insert(&self, id: RequestId, task: tokio::task::JoinHandle<()>) {
        let generation = {
            let mut next = self.next.borrow_mut();
            *next += 1;
            *next
        };
        self.map
            .borrow_mut()
            .insert(id.clone(), (generation, task.abort_handle()));
        let map = self.map.clone();
        actix_rt::spawn(async move {
            let _ = task.await;
            let mut map = map.borrow_mut();
            if map.get(&id).is_some_and(|(g, _)| *g == generation) {
                map.remove(&id);
            }
        });
    }

    fn cancel(&self, id: &RequestId) {
        if let Some((_, task)) = self.map.borrow_mut().remove(id) {
            task.abort();
        }
    }

    fn cancel_all(&self) {
        for (_, (_, task)) in self.map.borrow_mut().drain() {
            task.abort();
        }
    }
}

/// Serves `suite` on any byte pipe: `reader` carries requests, `writer` gets every
/// response and notification. Returns when the reader ends, the writer fails, or
/// `server` shuts down, after tearing down (or completing) every stream.
pub async fn serve_io<H, R, W>(
    suite: Suite<H>,
    server: Server,
    config: &StdioConfig,
    reader: R,
    writer: W,
) -> io::Result<()>
where
    H: SubscriptionHandler,
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin + 'static,
{
    let (tx, rx) = outbox(server.limits().outbox_capacity);
    let mut writer = actix_rt::spawn(write_frames(rx, writer, server.clone()));
    let connection = Connection::pipe(server.clone(), tx.clone()).start();
    let in_flight = InFlight::default();
    let mut lines = Lines {
        reader: BufReader::new(reader),
        max: config.max_line,
    };
    let pipe = Pipe {
        suite: &suite,
        server: &server,
        config,
        connection: &connection,
        outbox: &tx,
        in_flight: &in_flight,
    };
    let mut era = Era::Undecided;
    let shutdown = server.shutdown_signal();
    tokio::pin!(shutdown);
    let mut writer_result = None;
    loop {
        let line = tokio::select! {
            line = lines.next() => line,
            () = &mut shutdown => break,
            // stdout failed (the client closed it): nothing can be answered any more.
            result = &mut writer => {
                writer_result = Some(result);
                break;
            }
        };
        match line {
            Ok(Some(Line::Text(bytes))) => {
                let text = bytes.strip_suffix(b"\r").unwrap_or(&bytes);
                if text.iter().all(u8::is_ascii_whitespace) {
                    continue;
                }
                handle_line(&pipe, &mut era, text).await;
            }
            Ok(Some(Line::TooLong)) => {
                let error =
                    McpError::InvalidRequest(format!("line longer than {} bytes", config.max_line));
                refuse(
                    &pipe,
                    Refused::unread(NetworkTransport::Pipe, None),
                    &error,
                    Instant::now(),
                );
                send_error(&tx, server.limits().stall_timeout, None, &error).await;
            }
            Ok(None) => break,
            Err(e) => {
                tracing::warn!(error = %e, "stdin read failed");
                break;
            }
        }
    }
    // Teardown: on shutdown the connection completes its streams by itself; on
    // EOF every stream is disconnected (handle_close runs). A 2025 session's
    // handles (outbox, connection) go first, so the writer can end.
    drop(era);
    in_flight.cancel_all();
    if !server.is_shutting_down() {
        connection.do_send(CloseTransport);
    }
    let deadline = tokio::time::Instant::now() + config.drain_timeout;
    while connection.connected() && tokio::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    drop(connection);
    drop(tx);
    let result = match writer_result {
        Some(done) => done,
        None => match tokio::time::timeout(config.drain_timeout, writer).await {
            Ok(done) => done,
            Err(_) => return Ok(()),
        },
    };
    result.unwrap_or_else(|_| Err(io::Error::other("stdout writer failed")))
}

/// Which protocol era the pipe speaks, decided by its first request.
enum Era {
    /// No request yet.
    Undecided,
    /// 2026-07-28.
    Modern,
    /// A 2025-era session, after its `initialize`.
    Legacy(Box<legacy::Session>),
}

/// What one pipe's request handling needs.
struct Pipe<'a, H: SubscriptionHandler> {
    suite: &'a Suite<H>,
    server: &'a Server,
    config: &'a StdioConfig,
    connection: &'a Addr<Connection>,
    outbox: &'a Outbox,
    in_flight: &'a InFlight,
}

/// A request that did not run: the error to reply, and how it is counted
/// (`refused` unless said otherwise), in `genmcp_requests_total` and its
/// span alike.
struct NotRun {
    error: McpError,
    outcome: RequestOutcome,
}

impl From<McpError> for NotRun {
    fn from(error: McpError) -> Self {
        NotRun {
            error,
            outcome: RequestOutcome::Refused,
        }
    }
}

/// Records a request refused before any handler saw it: its span and
/// duration (since `started`), with what is known of it (`refused`).
fn refuse<H: SubscriptionHandler>(
    pipe: &Pipe<'_, H>,
    refused: Refused,
    error: &McpError,
    started: Instant,
) {
    Operation::refused(
        pipe.server,
        refused,
        Refusal::Rpc(error.code()),
        started,
        |method, name| crate::transport::dispatch::target_known(pipe.suite, method, name),
    );
}

async fn handle_line<H: SubscriptionHandler>(pipe: &Pipe<'_, H>, era: &mut Era, text: &[u8]) {
    if let Era::Legacy(session) = era {
        return legacy::handle_line(pipe, session, text).await;
    }
    let started = Instant::now();
    let Pipe {
        server,
        connection,
        outbox,
        in_flight,
        ..
    } = pipe;
    let stall = server.limits().stall_timeout;
    let request = match Incoming::parse(text) {
        Ok(Incoming::Request(r)) => r,
        Ok(Incoming::Notification(n)) => {
            if n.method == methods::CANCELLED
                && let Some(id) = n.params.get("requestId").and_then(RequestId::from_value)
            {
                // A listen ends without a completion result; a request without a
                // response. Unknown ids are ignored.
                connection.do_send(CancelStream { id: id.clone() });
                in_flight.cancel(&id);
            }
            return;
        }
        Err(e) => {
            let mut refused = Refused::unread(NetworkTransport::Pipe, None);
            refused.read_message(text);
            if let Some(id) = &e.id {
                refused.set_id(id);
            }
            refuse(pipe, refused, &e.error, started);
            send_error(outbox, stall, e.id.as_ref(), &e.error).await;
            return;
        }
    };
    if matches!(era, Era::Undecided) {
        if pipe.config.compat
            && crate::compat::is_legacy_initialize(&request.method, request.params.as_ref())
        {
            if let Some(session) = legacy::initialize(pipe, request).await {
                *era = Era::Legacy(Box::new(session));
            }
            return;
        }
        *era = Era::Modern;
    }
    let id = request.id.clone();
    let method = method_label(&request.method);
    // What a refusal's span says, read again from the line (the parsed
    // request goes into `admit`): nothing is read for a request served.
    let refused = || {
        let mut refused = Refused::unread(NetworkTransport::Pipe, None);
        refused.read_message(text);
        refused
    };
    let routed = match admit(pipe, request) {
        Ok(routed) => routed,
        Err(error) => {
            server.record_request(method, RequestOutcome::Refused, None);
            refuse(pipe, refused(), &error, started);
            send_error(outbox, stall, Some(&id), &error).await;
            return;
        }
    };
    if let Err(NotRun { error, outcome }) = dispatch(pipe, id.clone(), routed).await {
        let mut refused = refused();
        refused.outcome = outcome;
        refuse(pipe, refused, &error, started);
        send_error(outbox, stall, Some(&id), &error).await;
    }
}

/// Validates and routes a request: an error here means it reached no handler.
fn admit<H: SubscriptionHandler>(pipe: &Pipe<'_, H>, request: Request) -> Result<Routed, McpError> {
    let Request { id, method, params } = request;
    let meta = validate_meta(&method, params.as_ref())?;
    if pipe.in_flight.contains(&id) {
        return Err(McpError::InvalidRequest(format!(
            "a request with id {id} is already in flight"
        )));
    }
    route(
        pipe.suite,
        pipe.server,
        id,
        method,
        params.unwrap_or_default(),
        meta,
        Assigns::new(),
        pipe.outbox.clone(),
    )
}

/// Runs a routed request: a unary one as a task, a listen as a stream.
async fn dispatch<H: SubscriptionHandler>(
    pipe: &Pipe<'_, H>,
    id: RequestId,
    routed: Routed,
) -> Result<(), NotRun> {
    let Pipe {
        suite,
        server,
        config,
        connection,
        outbox,
        in_flight,
    } = *pipe;
    match routed {
        Routed::Unary {
            method,
            params,
            channel,
        } => {
            if in_flight.len() >= config.max_in_flight {
                server.record_request(&method, RequestOutcome::Error, None);
                return Err(NotRun {
                    error: McpError::internal("Too many requests in flight"),
                    outcome: RequestOutcome::Error,
                });
            }
            // The id of a listen still open (or whose final frame is still
            // queued) is in flight too: the answer would pass for that
            // stream's final frame.
            if connection
                .send(HoldsId { id: id.clone() })
                .await
                .unwrap_or(false)
            {
                server.record_request(&method, RequestOutcome::Refused, None);
                return Err(McpError::InvalidRequest(format!(
                    "a request with id {id} is already in flight"
                ))
                .into());
            }
            let deadlines = Deadlines {
                request: config.request_timeout,
                stall: server.limits().stall_timeout,
            };
            let (future, _status) = unary_future(
                suite,
                server,
                method,
                params,
                channel,
                deadlines,
                (),
                Origin::PIPE,
            );
            in_flight.insert(id, actix_rt::spawn(future));
        }
        Routed::Listen(listen_request) => {
            let ListenRequest {
                meta,
                assigns,
                filter,
            } = *listen_request;
            // Awaited in line order (the connection answers at once; `subscribe`
            // runs later in the stream actor), so a cancel on the next line always
            // finds the stream registered.
            let opened = spawn_listen(
                suite,
                server,
                connection,
                outbox.clone(),
                id,
                meta,
                assigns,
                filter,
            )
            .await;
            let outcome = RequestOutcome::answered(&opened);
            server.record_request(methods::LISTEN, outcome, None);
            opened.map_err(|error| NotRun { error, outcome })?;
        }
    }
    Ok(())
}
