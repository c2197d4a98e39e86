//! The workload: clients on their own threads, each operation recorded.
//!
//! - a **task worker** per principal (`alice`, `bob`): creates `export_notes`
//!   tasks (about 2 s `working`, then `input_required` until answered) on a
//!   random node, reads them on every node, then answers (`tasks/update`) or
//!   cancels them on another node, or leaves them waiting (so the
//!   per-principal bound is reached; a refused create cancels the oldest);
//! - two **session workers** (`carol`, and `dave` whose streams the demo
//!   narrows; 2025-11-25 through the round-robin proxy): initialize, the GET
//!   stream, subscribe / publish / unsubscribe / publish on a fresh note each
//!   cycle, a second GET as a probe, DELETE;
//! - a **race worker** (`carol`, 2026): a waiting task cancelled on its node
//!   while a listen naming it opens on another, a few milliseconds apart;
//! - a **reader**: `tasks/get` of a recent task on a random node, every 150 ms;
//! - a **listen worker** (`alice`, 2026): a listen on a random node naming
//!   recent tasks (`taskIds`) and a fresh note (`resourceSubscriptions`), two
//!   publishes, closed after a few seconds.
//!
//! Workers check `stop` between operations; every request has a timeout, so
//! they end by themselves.

use std::net::{SocketAddr, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::history::{Kind, Outcome, Pending, Recorder, What};
use super::http::{self, HttpError, Item};
use super::proxy::ProxyHandle;
use super::rng::Rng;

/// The 2026 protocol version.
pub const VERSION: &str = "2026-07-28";
/// The 2025 protocol version.
pub const LEGACY: &str = "2025-11-25";
/// The tasks extension.
pub const EXT: &str = "io.modelcontextprotocol/tasks";
/// How long a request may take before its outcome is unknown.
pub const TIMEOUT: Duration = Duration::from_secs(10);

/// What the workers share.
#[derive(Clone)]
pub struct Ctx {
    /// The history.
    pub rec: Recorder,
    /// The nodes' addresses.
    pub nodes: Vec<SocketAddr>,
    /// The round-robin proxy in front of them.
    pub proxy: ProxyHandle,
    /// Set when the workers should finish.
    pub stop: Arc<AtomicBool>,
    /// Recent tasks of `alice` (the listen worker names them).
    pub alice_tasks: Arc<Mutex<Vec<String>>>,
    /// Recent tasks of every principal, with their principal (the reader
    /// reads them).
    pub recent_tasks: Arc<Mutex<Vec<(String, &'static str)>>>,
    /// Open streams, for the harness to close at the end.
    pub streams: Arc<Mutex<Vec<OpenStream>>>,
    notes: Arc<AtomicU64>,
}

/// A stream the harness may have to close.
pub struct OpenStream {
    /// Its op's id.
    pub id: u64,
    closer: Option<TcpStream>,
    closing: Arc<AtomicBool>,
    ended: Arc<AtomicBool>,
}

impl OpenStream {
    /// Closes it (the reader records the end as the harness's).
    pub fn close(&self) {
        self.closing.store(true, Ordering::SeqCst);
        if let Some(c) = &self.closer {
            let _ = c.shutdown(std::net::Shutdown::Both);
        }
    }

    /// Whether it ended.
    pub fn ended(&self) -> bool {
        self.ended.load(Ordering::SeqCst)
    }
}

impl Ctx {
    /// A context for `nodes` behind `proxy`.
    pub fn new(rec: Recorder, nodes: Vec<SocketAddr>, proxy: ProxyHandle) -> Ctx {
        Ctx {
            rec,
            nodes,
            proxy,
            stop: Arc::default(),
            alice_tasks: Arc::default(),
            recent_tasks: Arc::default(),
            streams: Arc::default(),
            notes: Arc::new(AtomicU64::new(0)),
        }
    }

    fn stopped(&self) -> bool {
        self.stop.load(Ordering::SeqCst)
    }

    /// Closes every open stream (the end of the run).
    pub fn close_streams(&self) {
        let streams = std::mem::take(&mut *self.streams.lock().expect("streams lock"));
        for s in &streams {
            s.close();
        }
        // Their readers record the end; wait for them (bounded).
        let deadline = Instant::now() + Duration::from_secs(5);
        while Instant::now() < deadline && !streams.iter().all(OpenStream::ended) {
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Reads `stream` on a thread of its own, recording each item under `id`.
    fn follow(&self, id: u64, mut stream: http::Stream) -> Arc<AtomicBool> {
        let closing = Arc::new(AtomicBool::new(false));
        let ended = Arc::new(AtomicBool::new(false));
        stream.set_timeout(Duration::from_secs(3600));
        self.streams.lock().expect("streams lock").push(OpenStream {
            id,
            closer: stream.closer(),
            closing: closing.clone(),
            ended: ended.clone(),
        });
        let rec = self.rec.clone();
        let done = ended.clone();
        std::thread::spawn(move || {
            loop {
                match stream.next_item() {
                    Ok(Some(Item::Message(m))) => rec.event(id, What::Message(m)),
                    Ok(Some(Item::Comment)) => rec.event(id, What::Alive),
                    Ok(None) | Err(_) => {
                        rec.event(
                            id,
                            What::End {
                                by_harness: closing.load(Ordering::SeqCst),
                            },
                        );
                        done.store(true, Ordering::SeqCst);
                        return;
                    }
                }
            }
        });
        ended
    }

    fn close_stream(&self, id: u64) {
        let mut streams = self.streams.lock().expect("streams lock");
        if let Some(pos) = streams.iter().position(|s| s.id == id) {
            let s = streams.remove(pos);
            drop(streams);
            s.close();
            let deadline = Instant::now() + Duration::from_secs(2);
            while !s.ended() && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(10));
            }
        }
    }

    fn next_note_text(&self, worker: &str) -> String {
        format!("{worker}-{}", self.notes.fetch_add(1, Ordering::SeqCst))
    }
}

/// `_meta` of a 2026 request declaring the tasks extension and elicitation.
fn meta() -> Value {
    json!({
        "io.modelcontextprotocol/protocolVersion": VERSION,
        "io.modelcontextprotocol/clientInfo": {"name": "genmcp-faults", "version": "0"},
        "io.modelcontextprotocol/clientCapabilities": {"elicitation": {}, "extensions": {EXT: {}}},
    })
}

fn bearer(principal: &str) -> (String, String) {
    ("Authorization".into(), format!("Bearer tok-{principal}"))
}

fn headers_2026(principal: &str, method: &str, name: Option<&str>) -> Vec<(String, String)> {
    let mut h = vec![
        ("Content-Type".into(), "application/json".into()),
        (
            "Accept".into(),
            "application/json, text/event-stream".into(),
        ),
        ("MCP-Protocol-Version".into(), VERSION.into()),
        ("Mcp-Method".into(), method.into()),
        bearer(principal),
    ];
    if let Some(n) = name {
        h.push(("Mcp-Name".into(), n.into()));
    }
    h
}

fn headers_2025(principal: &str, session: Option<&str>) -> Vec<(String, String)> {
    let mut h = vec![
        ("Content-Type".into(), "application/json".into()),
        (
            "Accept".into(),
            "application/json, text/event-stream".into(),
        ),
        ("MCP-Protocol-Version".into(), LEGACY.into()),
        bearer(principal),
    ];
    if let Some(s) = session {
        h.push(("Mcp-Session-Id".into(), s.into()));
    }
    h
}

/// The outcome of a JSON-RPC exchange and what to record: the message, or
/// the HTTP error.
fn judge(sent: &Result<(http::Reply, u16), HttpError>) -> (Outcome, Value) {
    match sent {
        Err(e) => (e.outcome(), json!({"http": e.to_string()})),
        Ok((reply, _)) => {
            let m = reply.message();
            if reply.status == 200 && m.get("result").is_some() {
                if m["result"]["isError"] == true {
                    (Outcome::Failed, m)
                } else {
                    (Outcome::Ok, m)
                }
            } else if m.is_null() {
                (
                    Outcome::Failed,
                    json!({"status": reply.status, "body": String::from_utf8_lossy(&reply.body)}),
                )
            } else {
                let mut m = m;
                m["httpStatus"] = json!(reply.status);
                (Outcome::Failed, m)
            }
        }
    }
}

/// A 2026 request on `addr`: its outcome and message.
fn rpc(
    addr: SocketAddr,
    principal: &str,
    method: &str,
    name: Option<&str>,
    params: Value,
) -> (Outcome, Value) {
    rpc_within(addr, principal, method, name, params, TIMEOUT)
}

/// [`rpc`] giving up (unknown) after `timeout`.
fn rpc_within(
    addr: SocketAddr,
    principal: &str,
    method: &str,
    name: Option<&str>,
    mut params: Value,
    timeout: Duration,
) -> (Outcome, Value) {
    params["_meta"] = meta();
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params});
    let sent = http::send(
        addr,
        "POST",
        &headers_2026(principal, method, name),
        body.to_string().as_bytes(),
        timeout,
    );
    judge(&sent)
}

/// Runs `p` as the 2026 request it describes on node `node`; records and
/// returns its outcome and message.
fn record_rpc(
    ctx: &Ctx,
    p: Pending,
    node: usize,
    principal: &str,
    method: &str,
    name: Option<&str>,
    params: Value,
) -> (Outcome, Value) {
    let (outcome, value) = rpc(ctx.nodes[node], principal, method, name, params);
    p.end(outcome, value.clone());
    (outcome, value)
}

fn get_task(ctx: &Ctx, worker: &str, principal: &str, node: usize, task: &str) -> (Outcome, Value) {
    let p = ctx
        .rec
        .begin(worker, Kind::GetTask, Some(node), principal)
        .task(task);
    record_rpc(
        ctx,
        p,
        node,
        principal,
        "tasks/get",
        Some(task),
        json!({"taskId": task}),
    )
}

/// Reads `task` on every node as `kind` (`GetTask` or `FinalGet`).
pub fn read_everywhere(ctx: &Ctx, worker: &str, principal: &str, task: &str, kind: Kind) {
    for node in 0..ctx.nodes.len() {
        let p = ctx
            .rec
            .begin(worker, kind, Some(node), principal)
            .task(task);
        record_rpc(
            ctx,
            p,
            node,
            principal,
            "tasks/get",
            Some(task),
            json!({"taskId": task}),
        );
    }
}

fn status(v: &Value) -> &str {
    v["result"]["status"].as_str().unwrap_or("")
}

/// Whether `s` is a terminal task status.
pub fn terminal(s: &str) -> bool {
    matches!(s, "completed" | "failed" | "cancelled")
}

fn sleep_unless_stopped(ctx: &Ctx, d: Duration) {
    let deadline = Instant::now() + d;
    while Instant::now() < deadline && !ctx.stopped() {
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The task worker of `principal` (see the module docs).
pub fn task_worker(ctx: Ctx, principal: &'static str, mut rng: Rng) {
    let worker = format!("tasks-{principal}");
    let n = ctx.nodes.len();
    let mut parked: Vec<(String, usize)> = Vec::new();
    while !ctx.stopped() {
        let node = rng.below(n);
        let p = ctx
            .rec
            .begin(&worker, Kind::CreateTask, Some(node), principal);
        let (outcome, created) = {
            let (o, v) = rpc(
                ctx.nodes[node],
                principal,
                "tools/call",
                Some("export_notes"),
                json!({"name": "export_notes", "arguments": {}}),
            );
            let mut p = p;
            if let Some(id) = v["result"]["taskId"].as_str() {
                p.set_task(id);
            }
            p.end(o, v.clone());
            (o, v)
        };
        let Some(task) = created["result"]["taskId"].as_str().map(str::to_owned) else {
            if outcome == Outcome::Failed && created["httpStatus"] == 429 && !parked.is_empty() {
                // The bound: cancel the oldest waiting task on any node.
                let (old, _) = parked.remove(0);
                let at = rng.below(n);
                let p = ctx
                    .rec
                    .begin(&worker, Kind::CancelTask, Some(at), principal)
                    .task(&old);
                record_rpc(
                    &ctx,
                    p,
                    at,
                    principal,
                    "tasks/cancel",
                    Some(&old),
                    json!({"taskId": old}),
                );
            }
            sleep_unless_stopped(&ctx, Duration::from_millis(300));
            continue;
        };
        {
            let mut recent = ctx.recent_tasks.lock().expect("tasks lock");
            recent.push((task.clone(), principal));
            let len = recent.len();
            if len > 16 {
                recent.drain(..len - 16);
            }
        }
        if principal == "alice" {
            let mut recent = ctx.alice_tasks.lock().expect("tasks lock");
            recent.push(task.clone());
            let len = recent.len();
            if len > 8 {
                recent.drain(..len - 8);
            }
        }
        // Until it asks its question (about 2 s), reading on random nodes.
        let deadline = Instant::now() + Duration::from_secs(8);
        let mut asked: Option<Value> = None;
        while Instant::now() < deadline && !ctx.stopped() {
            let (o, v) = get_task(&ctx, &worker, principal, rng.below(n), &task);
            if o == Outcome::Ok && status(&v) == "input_required" {
                asked = Some(v);
                break;
            }
            if o == Outcome::Ok && terminal(status(&v)) {
                break;
            }
            std::thread::sleep(Duration::from_millis(300));
        }
        let other = (node + 1 + rng.below(n - 1)) % n;
        let roll = rng.below(100);
        match asked {
            Some(v) if roll < 40 => {
                let key = v["result"]["inputRequests"]
                    .as_object()
                    .and_then(|m| m.keys().next().cloned())
                    .unwrap_or_default();
                let params = json!({"taskId": task, "inputResponses": {key: {"action": "accept", "content": {"confirm": true}}}});
                let p = ctx
                    .rec
                    .begin(&worker, Kind::UpdateTask, Some(other), principal)
                    .task(&task);
                record_rpc(
                    &ctx,
                    p,
                    other,
                    principal,
                    "tasks/update",
                    Some(&task),
                    params,
                );
            }
            Some(_) if roll < 80 => {
                let p = ctx
                    .rec
                    .begin(&worker, Kind::CancelTask, Some(other), principal)
                    .task(&task);
                record_rpc(
                    &ctx,
                    p,
                    other,
                    principal,
                    "tasks/cancel",
                    Some(&task),
                    json!({"taskId": task}),
                );
            }
            Some(_) => parked.push((task.clone(), node)),
            None => {}
        }
        sleep_unless_stopped(&ctx, Duration::from_millis(200));
        read_everywhere(&ctx, &worker, principal, &task, Kind::GetTask);
    }
}

/// The reader: a recent task of any principal on a random node, every
/// 150 ms (a lapsed lease is noticed by the node that reads the task).
pub fn reader(ctx: Ctx, mut rng: Rng) {
    while !ctx.stopped() {
        let picked = {
            let recent = ctx.recent_tasks.lock().expect("tasks lock");
            (!recent.is_empty()).then(|| recent[rng.below(recent.len())].clone())
        };
        if let Some((task, principal)) = picked {
            // A short wait: a stopped node must not hold the reader up.
            let node = rng.below(ctx.nodes.len());
            let p = ctx
                .rec
                .begin("reader", Kind::GetTask, Some(node), principal)
                .task(&task);
            let (o, v) = rpc_within(
                ctx.nodes[node],
                principal,
                "tasks/get",
                Some(&task),
                json!({"taskId": task}),
                Duration::from_millis(1500),
            );
            p.end(o, v);
        }
        sleep_unless_stopped(&ctx, Duration::from_millis(150));
    }
}

/// A 2025 request of `session` through the proxy; records it as `p` and
/// returns its outcome and message.
fn legacy_rpc(
    ctx: &Ctx,
    mut p: Pending,
    principal: &str,
    session: &str,
    method: &str,
    params: Value,
) -> (Outcome, Value) {
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params});
    let sent = http::send(
        ctx.proxy.addr,
        "POST",
        &headers_2025(principal, Some(session)),
        body.to_string().as_bytes(),
        TIMEOUT,
    );
    if let Ok((_, port)) = &sent {
        p.set_node(ctx.proxy.node_of(*port));
    }
    let (o, v) = judge(&sent);
    p.end(o, v.clone());
    (o, v)
}

/// Adds a note (2026, a random node); its URI.
fn new_note(ctx: &Ctx, worker: &str, principal: &str, rng: &mut Rng) -> Option<String> {
    let node = rng.below(ctx.nodes.len());
    let text = ctx.next_note_text(worker);
    let p = ctx.rec.begin(worker, Kind::Publish, Some(node), principal);
    let (o, v) = rpc(
        ctx.nodes[node],
        principal,
        "tools/call",
        Some("add_note"),
        json!({"name": "add_note", "arguments": {"text": text}}),
    );
    let uri = v["result"]["content"][0]["text"]
        .as_str()
        .map(str::to_owned);
    let p = match &uri {
        Some(u) if o == Outcome::Ok => p.uri(u),
        _ => p,
    };
    p.end(o, v);
    uri.filter(|_| o == Outcome::Ok)
}

/// Changes note `uri` (2026, a random node): its `resources/updated`.
fn publish(ctx: &Ctx, worker: &str, principal: &str, uri: &str, rng: &mut Rng) {
    let node = rng.below(ctx.nodes.len());
    let text = ctx.next_note_text(worker);
    let p = ctx
        .rec
        .begin(worker, Kind::Publish, Some(node), principal)
        .uri(uri);
    record_rpc(
        ctx,
        p,
        node,
        principal,
        "tools/call",
        Some("add_note"),
        json!({"name": "add_note", "arguments": {"text": text, "uri": uri}}),
    );
}

/// An open GET stream: its op id and the flag set when it ended.
type OpenedGet = (u64, Arc<AtomicBool>);

/// Opens the GET stream of `session` through the proxy (retrying a 409 a few
/// times); the op id and the flag set when it ended.
fn open_get(
    ctx: &Ctx,
    worker: &str,
    principal: &str,
    session: &str,
    kind: Kind,
) -> Option<OpenedGet> {
    let tries = if kind == Kind::OpenGet { 10 } else { 1 };
    for _ in 0..tries {
        if ctx.stopped() {
            return None;
        }
        let mut p = ctx
            .rec
            .begin(worker, kind, None, principal)
            .session(session);
        let h = vec![
            ("Accept".to_owned(), "text/event-stream".to_owned()),
            ("MCP-Protocol-Version".to_owned(), LEGACY.to_owned()),
            ("Mcp-Session-Id".to_owned(), session.to_owned()),
            bearer(principal),
        ];
        match http::open(ctx.proxy.addr, "GET", &h, b"", TIMEOUT) {
            Ok(stream) if stream.status == 200 => {
                p.set_node(ctx.proxy.node_of(stream.local_port));
                let id = p.end(Outcome::Ok, json!({"status": 200}));
                let ended = ctx.follow(id, stream);
                return Some((id, ended));
            }
            Ok(mut stream) => {
                p.set_node(ctx.proxy.node_of(stream.local_port));
                let body = stream.read_to_end().unwrap_or_default();
                p.end(
                    Outcome::Failed,
                    json!({"status": stream.status, "body": String::from_utf8_lossy(&body)}),
                );
            }
            Err(e) => {
                p.end(e.outcome(), json!({"http": e.to_string()}));
            }
        }
        std::thread::sleep(Duration::from_millis(500));
    }
    None
}

/// The session worker (see the module docs).
pub fn session_worker(ctx: Ctx, principal: &'static str, mut rng: Rng) {
    let worker = format!("sessions-{principal}");
    // A session is kept (and its GET stream opened again) until its DELETE
    // is answered ok: after an outage the same session must get its GET
    // stream back.
    let mut kept: Option<(String, Option<OpenedGet>)> = None;
    while !ctx.stopped() {
        let (session, get) = match kept.take() {
            Some(k) => k,
            None => match initialize(&ctx, &worker, principal) {
                Some(session) => (session, None),
                None => {
                    sleep_unless_stopped(&ctx, Duration::from_millis(500));
                    continue;
                }
            },
        };
        let mut get = get;
        for _cycle in 0..3 {
            if ctx.stopped() {
                break;
            }
            if get
                .as_ref()
                .is_none_or(|(_, ended)| ended.load(Ordering::SeqCst))
            {
                get = open_get(&ctx, &worker, principal, &session, Kind::OpenGet);
            }
            let Some(uri) = new_note(&ctx, &worker, principal, &mut rng) else {
                sleep_unless_stopped(&ctx, Duration::from_millis(500));
                continue;
            };
            let p = ctx
                .rec
                .begin(&worker, Kind::Subscribe, None, principal)
                .session(&session)
                .uri(&uri);
            legacy_rpc(
                &ctx,
                p,
                principal,
                &session,
                "resources/subscribe",
                json!({"uri": uri}),
            );
            for _ in 0..2 {
                sleep_unless_stopped(&ctx, Duration::from_millis(600));
                publish(&ctx, &worker, principal, &uri, &mut rng);
            }
            // Room for the last update to arrive before the unsubscribe.
            sleep_unless_stopped(&ctx, Duration::from_millis(1000));
            let streaming = get
                .as_ref()
                .is_some_and(|(_, ended)| !ended.load(Ordering::SeqCst));
            if rng.chance(50)
                && streaming
                && let Some((probe, _)) =
                    open_get(&ctx, &worker, principal, &session, Kind::ProbeGet)
            {
                ctx.close_stream(probe);
            }
            let p = ctx
                .rec
                .begin(&worker, Kind::Unsubscribe, None, principal)
                .session(&session)
                .uri(&uri);
            legacy_rpc(
                &ctx,
                p,
                principal,
                &session,
                "resources/unsubscribe",
                json!({"uri": uri}),
            );
            sleep_unless_stopped(&ctx, Duration::from_millis(300));
            publish(&ctx, &worker, principal, &uri, &mut rng);
            sleep_unless_stopped(&ctx, Duration::from_millis(1000));
        }
        // DELETE, then the GET stream must end by itself.
        let mut p = ctx
            .rec
            .begin(&worker, Kind::Delete, None, principal)
            .session(&session);
        let h = vec![
            ("Mcp-Session-Id".to_owned(), session.clone()),
            ("MCP-Protocol-Version".to_owned(), LEGACY.to_owned()),
            bearer(principal),
        ];
        let deleted = match http::send(ctx.proxy.addr, "DELETE", &h, b"", TIMEOUT) {
            Ok((reply, port)) => {
                p.set_node(ctx.proxy.node_of(port));
                let o = if reply.status == 200 {
                    Outcome::Ok
                } else {
                    Outcome::Failed
                };
                p.end(
                    o,
                    json!({"status": reply.status, "body": String::from_utf8_lossy(&reply.body)}),
                );
                o == Outcome::Ok
            }
            Err(e) => {
                p.end(e.outcome(), json!({"http": e.to_string()}));
                false
            }
        };
        if !deleted && !ctx.stopped() {
            kept = Some((session, get));
            continue;
        }
        if let Some((id, ended)) = get {
            let deadline = Instant::now() + Duration::from_secs(8);
            while !ended.load(Ordering::SeqCst) && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(50));
            }
            ctx.close_stream(id);
        }
    }
}

/// `initialize` and `notifications/initialized` through the proxy; the new
/// session.
fn initialize(ctx: &Ctx, worker: &str, principal: &str) -> Option<String> {
    let mut p = ctx.rec.begin(worker, Kind::Initialize, None, principal);
    let body = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": LEGACY, "capabilities": {},
        "clientInfo": {"name": "genmcp-faults", "version": "0"}}});
    let mut h = headers_2025(principal, None);
    h.retain(|(k, _)| k != "MCP-Protocol-Version");
    let sent = http::send(
        ctx.proxy.addr,
        "POST",
        &h,
        body.to_string().as_bytes(),
        TIMEOUT,
    );
    let session = match &sent {
        Ok((reply, port)) if reply.status == 200 => {
            p.set_node(ctx.proxy.node_of(*port));
            reply.header("mcp-session-id").map(str::to_owned)
        }
        _ => None,
    };
    let Some(session) = session else {
        let (o, v) = judge(&sent);
        p.end(if o == Outcome::Ok { Outcome::Failed } else { o }, v);
        return None;
    };
    p.set_session(&session);
    p.end(Outcome::Ok, json!({}));
    let _ = http::send(
        ctx.proxy.addr,
        "POST",
        &headers_2025(principal, Some(&session)),
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"})
            .to_string()
            .as_bytes(),
        TIMEOUT,
    );
    Some(session)
}

/// Opens listen `id` on `node` asking for `asked`; once acknowledged, its
/// op id (the stream followed); `None` when refused or not acknowledged.
fn open_listen(
    ctx: &Ctx,
    worker: &str,
    principal: &str,
    node: usize,
    id: &str,
    asked: Value,
) -> Option<u64> {
    let mut p = ctx.rec.begin(worker, Kind::Listen, Some(node), principal);
    if let Some(uri) = asked["resourceSubscriptions"][0].as_str() {
        p = p.uri(uri);
    }
    let mut params = json!({"notifications": asked});
    params["_meta"] = meta();
    let body =
        json!({"jsonrpc": "2.0", "id": id, "method": "subscriptions/listen", "params": params});
    let opened = http::open(
        ctx.nodes[node],
        "POST",
        &headers_2026(principal, "subscriptions/listen", None),
        body.to_string().as_bytes(),
        TIMEOUT,
    );
    let mut stream = match opened {
        Ok(s) if s.status == 200 => s,
        Ok(mut s) => {
            let b = s.read_to_end().unwrap_or_default();
            p.end(
                Outcome::Failed,
                json!({"id": id, "asked": asked, "status": s.status, "body": String::from_utf8_lossy(&b)}),
            );
            return None;
        }
        Err(e) => {
            p.end(
                e.outcome(),
                json!({"id": id, "asked": asked, "http": e.to_string()}),
            );
            return None;
        }
    };
    // The acknowledgement first.
    let ack = loop {
        match stream.next_item() {
            Ok(Some(Item::Comment)) => continue,
            Ok(Some(Item::Message(m))) => break Some(m),
            _ => break None,
        }
    };
    let acked = ack
        .as_ref()
        .is_some_and(|m| m["method"] == "notifications/subscriptions/acknowledged");
    if !acked {
        p.end(
            Outcome::Failed,
            json!({"id": id, "asked": asked, "first": ack}),
        );
        stream.close();
        return None;
    }
    let ack = ack.unwrap_or_default();
    let sid = p.id();
    p.end(
        Outcome::Ok,
        json!({"id": id, "asked": asked, "acknowledged": ack["params"]["notifications"]}),
    );
    ctx.follow(sid, stream);
    Some(sid)
}

/// The listen worker (see the module docs).
pub fn listen_worker(ctx: Ctx, principal: &'static str, mut rng: Rng) {
    let worker = format!("listens-{principal}");
    let mut k = 0u64;
    while !ctx.stopped() {
        k += 1;
        let Some(uri) = new_note(&ctx, &worker, principal, &mut rng) else {
            sleep_unless_stopped(&ctx, Duration::from_millis(500));
            continue;
        };
        let tasks: Vec<String> = {
            let recent = ctx.alice_tasks.lock().expect("tasks lock");
            recent.iter().rev().take(3).cloned().collect()
        };
        let node = rng.below(ctx.nodes.len());
        let asked = json!({"taskIds": tasks, "resourceSubscriptions": [uri]});
        let Some(sid) = open_listen(&ctx, &worker, principal, node, &format!("L{k}"), asked) else {
            sleep_unless_stopped(&ctx, Duration::from_millis(500));
            continue;
        };
        for _ in 0..2 {
            sleep_unless_stopped(&ctx, Duration::from_millis(800));
            publish(&ctx, &worker, principal, &uri, &mut rng);
        }
        sleep_unless_stopped(&ctx, Duration::from_secs(4));
        ctx.close_stream(sid);
    }
}

/// The race worker: a task of `principal` waiting on node A is cancelled on
/// A while a listen naming it opens on node B, the two 0-5 ms apart (a
/// listen that reads the task before it watches it can miss its end).
pub fn race_worker(ctx: Ctx, principal: &'static str, mut rng: Rng) {
    let worker = format!("race-{principal}");
    let n = ctx.nodes.len();
    let mut k = 0u64;
    while !ctx.stopped() {
        k += 1;
        let owner = rng.below(n);
        let p = ctx
            .rec
            .begin(&worker, Kind::CreateTask, Some(owner), principal);
        let (o, created) = rpc(
            ctx.nodes[owner],
            principal,
            "tools/call",
            Some("export_notes"),
            json!({"name": "export_notes", "arguments": {}}),
        );
        let mut p = p;
        let task = created["result"]["taskId"].as_str().map(str::to_owned);
        if let Some(t) = &task {
            p.set_task(t);
        }
        p.end(o, created);
        let Some(task) = task else {
            sleep_unless_stopped(&ctx, Duration::from_millis(500));
            continue;
        };
        // Until it waits for its answer (about 2 s).
        let deadline = Instant::now() + Duration::from_secs(6);
        let mut waiting = false;
        while !waiting && Instant::now() < deadline && !ctx.stopped() {
            std::thread::sleep(Duration::from_millis(250));
            let (o, v) = get_task(&ctx, &worker, principal, owner, &task);
            waiting = o == Outcome::Ok && status(&v) == "input_required";
        }
        if !waiting {
            continue;
        }
        let other = (owner + 1 + rng.below(n - 1)) % n;
        // The two start 0-5 ms apart, either first.
        let delay = Duration::from_millis(rng.below(6) as u64);
        let listen_delay = Duration::from_millis(rng.below(6) as u64);
        let canceller = {
            let (ctx, worker, task) = (ctx.clone(), worker.clone(), task.clone());
            std::thread::spawn(move || {
                std::thread::sleep(delay);
                let p = ctx
                    .rec
                    .begin(&worker, Kind::CancelTask, Some(owner), principal)
                    .task(&task);
                record_rpc(
                    &ctx,
                    p,
                    owner,
                    principal,
                    "tasks/cancel",
                    Some(&task),
                    json!({"taskId": task}),
                );
                get_task(&ctx, &worker, principal, owner, &task);
            })
        };
        let asked = json!({"taskIds": [task]});
        std::thread::sleep(listen_delay);
        let listen = open_listen(&ctx, &worker, principal, other, &format!("R{k}"), asked);
        let _ = canceller.join();
        sleep_unless_stopped(&ctx, Duration::from_secs(4));
        if let Some(sid) = listen {
            ctx.close_stream(sid);
        }
    }
}
