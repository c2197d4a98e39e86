//! What the workers share: the history, the nodes and the proxy, the stop
//! flag, recent tasks, and the open streams (each read on a thread of its own).

use std::net::{SocketAddr, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::faults::history::{Recorder, What};
use crate::faults::http::{self, Item};
use crate::faults::proxy::ProxyHandle;

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

    pub fn stopped(&self) -> bool {
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
    pub fn follow(&self, id: u64, mut stream: http::Stream) -> Arc<AtomicBool> {
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

    pub fn close_stream(&self, id: u64) {
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

    pub fn next_note_text(&self, worker: &str) -> String {
        format!("{worker}-{}", self.notes.fetch_add(1, Ordering::SeqCst))
    }
}
