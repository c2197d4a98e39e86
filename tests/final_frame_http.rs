//! Exactly one final frame per acknowledged listen, over real HTTP on
//! 127.0.0.1 (issue 9, point 4): a client gone before its acknowledgement, the
//! SSE body's chunks and frame count, an overflow cut.

mod common;
#[path = "common/scripted.rs"]
mod scripted;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpStream};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex, mpsc};
use std::time::Duration;

use common::{Event, listen, wait_until};
use genmcp::prelude::*;
use scripted::{CapsHook, Cmd, Record, Then, is_final_for, seqs, sub_id, the_one_final_frame};
use serde_json::{Value, json};

const BOUND: Duration = Duration::from_secs(10);

struct Srv {
    thread: ServerThread,
    bus: Bus<Cmd>,
    record: Arc<Record>,
}

impl Srv {
    fn start(config: HttpConfig, hook: Option<CapsHook>) -> Srv {
        let bus: Bus<Cmd> = Bus::new();
        let record = Arc::new(Record::default());
        let (b, r) = (bus.clone(), record.clone());
        let thread = ServerThread::spawn(move || scripted::suite(b, r, hook), config)
            .expect("server starts");
        Srv {
            thread,
            bus,
            record,
        }
    }

    fn addr(&self) -> SocketAddr {
        self.thread.addr
    }

    fn metrics(&self) -> genmcp::runtime::Metrics {
        self.thread.server.metrics()
    }

    fn wait_subscribers(&self, n: usize) {
        assert!(
            wait_until(BOUND, || self.bus.subscribers("all").len() >= n),
            "expected {n} subscribers"
        );
    }
}

/// Writes a listen request on a new raw connection (nothing is read).
fn raw_listen(addr: SocketAddr, id: Value, notifications: Value) -> TcpStream {
    let body = common::request(
        id,
        "subscriptions/listen",
        json!({"notifications": notifications}),
    )
    .to_string();
    let mut stream = TcpStream::connect(addr).expect("connect");
    stream.set_read_timeout(Some(BOUND)).unwrap();
    let mut head = format!("POST /mcp HTTP/1.1\r\nHost: {addr}\r\n");
    for (k, v) in common::headers("subscriptions/listen", None) {
        head.push_str(&format!("{k}: {v}\r\n"));
    }
    head.push_str(&format!(
        "Content-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    ));
    stream.write_all(head.as_bytes()).unwrap();
    stream.write_all(body.as_bytes()).unwrap();
    stream
}

// 4. The client is gone before the acknowledgement is written.

#[test]
fn a_client_gone_right_after_sending_its_listen_still_gets_handle_close() {
    let (entered_tx, entered_rx) = mpsc::channel::<()>();
    let (release_tx, release_rx) = mpsc::channel::<()>();
    let entered_tx = Mutex::new(entered_tx);
    let release_rx = Mutex::new(release_rx);
    // Runs while the listen is being opened, before `subscribe`: holds the
    // request until the client has disconnected.
    let hook: CapsHook = Arc::new(move |_channel: &Channel| {
        let _ = entered_tx.lock().unwrap().send(());
        let _ = release_rx.lock().unwrap().recv_timeout(BOUND);
    });
    let mut config = common::config();
    config.keep_alive = Duration::from_millis(200);
    let srv = Srv::start(config, Some(hook));
    let socket = raw_listen(srv.addr(), json!("gone"), json!({"toolsListChanged": true}));
    entered_rx
        .recv_timeout(BOUND)
        .expect("the listen reached the handler");
    socket.shutdown(Shutdown::Both).unwrap();
    drop(socket);
    release_tx.send(()).unwrap();
    assert!(
        wait_until(BOUND, || !srv.record.closed().is_empty()),
        "handle_close did not run: {:?}",
        srv.metrics()
    );
    assert!(wait_until(BOUND, || srv.metrics().open_streams == 0));
    assert_eq!(srv.record.subscribed(), vec![RequestId::from("gone")]);
    assert_eq!(
        srv.record.closed(),
        vec![RequestId::from("gone")],
        "exactly once"
    );
    assert_eq!(srv.metrics().closed(CloseReason::Disconnected), 1);
    assert!(
        srv.bus.subscribers("all").is_empty(),
        "the state was released"
    );
}

// 7. The SSE body: every chunk holds frames until the final one, and the frame
//    count is what was written.

/// Reads a chunked HTTP response: the status, then each chunk as it comes.
struct Chunks {
    reader: BufReader<TcpStream>,
}

impl Chunks {
    fn open(stream: TcpStream) -> (u16, Chunks) {
        let mut reader = BufReader::new(stream);
        let mut status = String::new();
        reader.read_line(&mut status).unwrap();
        let code = status.split_whitespace().nth(1).unwrap().parse().unwrap();
        let mut chunked = false;
        loop {
            let mut line = String::new();
            reader.read_line(&mut line).unwrap();
            if line.trim_end().is_empty() {
                break;
            }
            let lower = line.to_ascii_lowercase();
            chunked |= lower.starts_with("transfer-encoding:") && lower.contains("chunked");
        }
        assert!(chunked, "an SSE body is chunked");
        (code, Chunks { reader })
    }

    /// The next chunk's data; an empty vector is the terminating `0` chunk.
    fn next(&mut self) -> Vec<u8> {
        let mut size = String::new();
        self.reader.read_line(&mut size).expect("a chunk size");
        let size = usize::from_str_radix(size.trim().split(';').next().unwrap(), 16)
            .unwrap_or_else(|_| panic!("bad chunk size {size:?}"));
        let mut data = vec![0; size];
        self.reader.read_exact(&mut data).unwrap();
        let mut crlf = [0u8; 2];
        self.reader.read_exact(&mut crlf).unwrap();
        assert_eq!(&crlf, b"\r\n");
        data
    }

    /// Whether the connection ends with nothing more.
    fn at_eof(&mut self) -> bool {
        let mut rest = Vec::new();
        self.reader.read_to_end(&mut rest).is_ok() && rest.is_empty()
    }
}

/// The JSON messages of SSE text (comments skipped).
fn messages(text: &[u8]) -> Vec<Value> {
    String::from_utf8_lossy(text)
        .lines()
        .filter_map(|l| l.strip_prefix("data: "))
        .map(|d| serde_json::from_str(d).expect("SSE data is JSON"))
        .collect()
}

#[test]
fn an_sse_body_never_ends_its_chunks_before_the_final_frame_and_counts_exactly_what_it_wrote() {
    let mut config = common::config();
    config.keep_alive = Duration::from_millis(50);
    let srv = Srv::start(config, None);
    let id = json!("chunks");
    let (status, mut chunks) = Chunks::open(raw_listen(
        srv.addr(),
        id.clone(),
        json!({"toolsListChanged": true}),
    ));
    assert_eq!(status, 200);
    let first = chunks.next();
    assert!(!first.is_empty());
    let mut text = first;
    srv.wait_subscribers(1);
    // Keep-alive comments while idle are chunks too, never empty ones.
    let comment = chunks.next();
    assert_eq!(comment, b": keepalive\n\n");
    srv.bus.publish(
        "all",
        Cmd::Burst {
            to: None,
            n: 100,
            pad: 100,
            then: Then::Stop,
        },
    );
    let mut transcript = messages(&text);
    loop {
        let chunk = chunks.next();
        if chunk.is_empty() {
            break;
        }
        transcript.extend(messages(&chunk));
        text.extend_from_slice(&chunk);
    }
    // The terminating chunk came after the final frame, and nothing follows it.
    let last = transcript.last().expect("frames");
    assert!(
        is_final_for(last, &id),
        "the body ended before its final frame: {last}"
    );
    assert_eq!(last["result"]["resultType"], "complete");
    the_one_final_frame(&transcript, &id);
    assert_eq!(seqs(&transcript, &id), (0..100).collect::<Vec<_>>());
    assert!(chunks.at_eof());
    assert_eq!(
        srv.metrics().frames_sent,
        transcript.len() as u64,
        "frames_sent counts the frames written, not keep-alives"
    );
}

// Overflow over HTTP: handle_close exactly once, the body just ends.

#[test]
fn an_http_stream_cut_for_overflow_runs_handle_close_exactly_once_and_its_body_just_ends() {
    let mut config = common::config();
    config.limits.outbox_capacity = 4;
    config.limits.spill_limit = 4;
    let srv = Srv::start(config, None);
    let id = json!("of");
    let mut s = listen(srv.addr(), id.clone(), json!({"toolsListChanged": true}));
    let ack = s.next_message().unwrap();
    assert_eq!(sub_id(&ack), &id);
    srv.wait_subscribers(1);
    // One callback sends more than the outbox and the spill hold.
    srv.bus.publish(
        "all",
        Cmd::Burst {
            to: None,
            n: 50,
            pad: 100,
            then: Then::Continue,
        },
    );
    assert!(wait_until(BOUND, || srv
        .metrics()
        .closed(CloseReason::Overflow)
        == 1));
    assert!(srv.record.refused_overflow(&RequestId::from("of")));
    let mut transcript = vec![ack];
    while let Some(ev) = s.next_event() {
        if let Event::Message(m) = ev {
            transcript.push(m);
        }
    }
    assert!(
        !transcript.iter().any(|v| is_final_for(v, &id)),
        "an overflow on HTTP ends the body, with no final frame"
    );
    let got = seqs(&transcript, &id);
    assert!(
        got.iter().enumerate().all(|(i, s)| *s == i as u64) && got.len() < 50,
        "{got:?}"
    );
    assert!(wait_until(BOUND, || srv.metrics().open_streams == 0));
    assert_eq!(
        srv.record.closed(),
        vec![RequestId::from("of")],
        "exactly once"
    );
    assert_eq!(srv.metrics().closed(CloseReason::Disconnected), 0);
    assert_eq!(
        srv.metrics().frames_sent,
        transcript.len() as u64,
        "frames_sent counts exactly what the client got"
    );
    assert_eq!(srv.record.handled.load(Ordering::SeqCst), 1);
    assert!(srv.bus.subscribers("all").is_empty());
}

// A completion dropped after the stall timeout is counted by what the client
// got: not `Completed`.

#[test]
fn a_completion_dropped_after_the_stall_timeout_is_counted_as_overflow_not_completed() {
    let mut config = common::config();
    config.limits.outbox_capacity = 4;
    config.limits.spill_limit = 64;
    config.limits.stall_timeout = Duration::from_millis(200);
    let srv = Srv::start(config, None);
    let id = json!("stuck");
    // A client that never reads.
    let socket = raw_listen(srv.addr(), id, json!({"toolsListChanged": true}));
    srv.wait_subscribers(1);
    // 60 frames of 256 KiB (far more than the socket buffers hold), then the
    // completion, queued behind them in the spill.
    srv.bus.publish(
        "all",
        Cmd::Burst {
            to: None,
            n: 60,
            pad: 256 * 1024,
            then: Then::Stop,
        },
    );
    assert!(
        wait_until(BOUND, || srv.metrics().open_streams == 0),
        "the stream did not end: {:?}",
        srv.metrics()
    );
    assert_eq!(
        srv.metrics().closed(CloseReason::Completed),
        0,
        "the completion never left the spill"
    );
    assert_eq!(srv.metrics().closed(CloseReason::Overflow), 1);
    assert!(srv.record.refused.lock().unwrap().is_empty());
    drop(socket);
}
