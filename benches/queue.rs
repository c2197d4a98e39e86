#![allow(missing_docs)] // criterion_group! generates an undocumented pub fn
//! `cargo bench --bench queue`: the data path's queue (`genmcp::queue`) against
//! maintained bounded MPSC queues (`tokio::sync::mpsc`, `async-channel`,
//! `flume`) on the two shapes the runtime gives it, each on one thread (a
//! tokio current-thread runtime with every task local, as an actix worker):
//!
//! - `mpsc`: 8 sender tasks `send().await` 1,024 items each into one queue
//!   of 64; one reader task drains it a batch per wake-up (`recv`, then
//!   `try_recv` until empty), the shape of a stdio pipe's outbox.
//! - `fanout`: one publisher `try_send`s each of 16 events to 1,000 queues of
//!   64 (yielding between events), one reader task per queue, the shape of a
//!   bus topic with 1,000 subscribed streams.
//!
//! Criterion reports items delivered per second; compare the rows of one run.

use std::time::{Duration, Instant};

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use tokio::task::LocalSet;

const SENDERS: usize = 8;
const PER_SENDER: u64 = 1_024;
const CAPACITY: usize = 64;
const STREAMS: usize = 1_000;
const EVENTS: u64 = 16;

/// One bounded MPSC queue, as the workloads use it.
trait Queue: 'static {
    type Tx: Clone + 'static;
    type Rx: 'static;
    const NAME: &'static str;
    fn bounded(capacity: usize) -> (Self::Tx, Self::Rx);
    fn try_send(tx: &Self::Tx, item: u64) -> bool;
    async fn send(tx: &Self::Tx, item: u64);
    async fn recv(rx: &mut Self::Rx) -> Option<u64>;
    fn try_recv(rx: &mut Self::Rx) -> Option<u64>;
}

struct Genmcp;
impl Queue for Genmcp {
    type Tx = genmcp::queue::Sender<u64>;
    type Rx = genmcp::queue::Receiver<u64>;
    const NAME: &'static str = "genmcp::queue";
    fn bounded(capacity: usize) -> (Self::Tx, Self::Rx) {
        genmcp::queue::bounded(capacity)
    }
    fn try_send(tx: &Self::Tx, item: u64) -> bool {
        tx.try_send(item).is_ok()
    }
    async fn send(tx: &Self::Tx, item: u64) {
        let _ = tx.send(item).await;
    }
    async fn recv(rx: &mut Self::Rx) -> Option<u64> {
        rx.recv().await
    }
    fn try_recv(rx: &mut Self::Rx) -> Option<u64> {
        rx.try_recv().ok()
    }
}

struct Tokio;
impl Queue for Tokio {
    type Tx = tokio::sync::mpsc::Sender<u64>;
    type Rx = tokio::sync::mpsc::Receiver<u64>;
    const NAME: &'static str = "tokio::sync::mpsc";
    fn bounded(capacity: usize) -> (Self::Tx, Self::Rx) {
        tokio::sync::mpsc::channel(capacity)
    }
    fn try_send(tx: &Self::Tx, item: u64) -> bool {
        tx.try_send(item).is_ok()
    }
    async fn send(tx: &Self::Tx, item: u64) {
        let _ = tx.send(item).await;
    }
    async fn recv(rx: &mut Self::Rx) -> Option<u64> {
        rx.recv().await
    }
    fn try_recv(rx: &mut Self::Rx) -> Option<u64> {
        rx.try_recv().ok()
    }
}

struct AsyncChannel;
impl Queue for AsyncChannel {
    type Tx = async_channel::Sender<u64>;
    type Rx = async_channel::Receiver<u64>;
    const NAME: &'static str = "async-channel";
    fn bounded(capacity: usize) -> (Self::Tx, Self::Rx) {
        async_channel::bounded(capacity)
    }
    fn try_send(tx: &Self::Tx, item: u64) -> bool {
        tx.try_send(item).is_ok()
    }
    async fn send(tx: &Self::Tx, item: u64) {
        let _ = tx.send(item).await;
    }
    async fn recv(rx: &mut Self::Rx) -> Option<u64> {
        rx.recv().await.ok()
    }
    fn try_recv(rx: &mut Self::Rx) -> Option<u64> {
        rx.try_recv().ok()
    }
}

struct Flume;
impl Queue for Flume {
    type Tx = flume::Sender<u64>;
    type Rx = flume::Receiver<u64>;
    const NAME: &'static str = "flume";
    fn bounded(capacity: usize) -> (Self::Tx, Self::Rx) {
        flume::bounded(capacity)
    }
    fn try_send(tx: &Self::Tx, item: u64) -> bool {
        tx.try_send(item).is_ok()
    }
    async fn send(tx: &Self::Tx, item: u64) {
        let _ = tx.send_async(item).await;
    }
    async fn recv(rx: &mut Self::Rx) -> Option<u64> {
        rx.recv_async().await.ok()
    }
    fn try_recv(rx: &mut Self::Rx) -> Option<u64> {
        rx.try_recv().ok()
    }
}

/// Reads until every sender has gone, a batch per wake-up; the items' sum.
async fn drain<Q: Queue>(mut rx: Q::Rx) -> u64 {
    let mut sum = 0;
    while let Some(item) = Q::recv(&mut rx).await {
        sum += item;
        while let Some(item) = Q::try_recv(&mut rx) {
            sum += item;
        }
    }
    sum
}

fn runtime() -> tokio::runtime::Runtime {
    match tokio::runtime::Builder::new_current_thread().build() {
        Ok(rt) => rt,
        Err(e) => panic!("no runtime: {e}"),
    }
}

/// `iters` rounds of the `mpsc` shape.
fn mpsc<Q: Queue>(rt: &tokio::runtime::Runtime, iters: u64) -> Duration {
    let start = Instant::now();
    for _ in 0..iters {
        LocalSet::new().block_on(rt, async {
            let (tx, rx) = Q::bounded(CAPACITY);
            let reader = tokio::task::spawn_local(drain::<Q>(rx));
            for _ in 0..SENDERS {
                let tx = tx.clone();
                tokio::task::spawn_local(async move {
                    for i in 0..PER_SENDER {
                        Q::send(&tx, i).await;
                    }
                });
            }
            drop(tx);
            let sum = reader.await.unwrap_or_default();
            assert_eq!(sum, SENDERS as u64 * (PER_SENDER * (PER_SENDER - 1) / 2));
        });
    }
    start.elapsed()
}

/// `iters` rounds of the `fanout` shape.
fn fanout<Q: Queue>(rt: &tokio::runtime::Runtime, iters: u64) -> Duration {
    let start = Instant::now();
    for _ in 0..iters {
        LocalSet::new().block_on(rt, async {
            let mut txs = Vec::with_capacity(STREAMS);
            let mut readers = Vec::with_capacity(STREAMS);
            for _ in 0..STREAMS {
                let (tx, rx) = Q::bounded(CAPACITY);
                txs.push(tx);
                readers.push(tokio::task::spawn_local(drain::<Q>(rx)));
            }
            let mut refused = 0u64;
            for event in 0..EVENTS {
                for tx in &txs {
                    refused += u64::from(!Q::try_send(tx, event));
                }
                tokio::task::yield_now().await;
            }
            drop(txs);
            let mut sum = 0;
            for reader in readers {
                sum += reader.await.unwrap_or_default();
            }
            assert_eq!(refused, 0, "every mailbox kept up");
            assert_eq!(sum, STREAMS as u64 * (EVENTS * (EVENTS - 1) / 2));
        });
    }
    start.elapsed()
}

fn bench<Q: Queue>(c: &mut Criterion, rt: &tokio::runtime::Runtime) {
    let mut group = c.benchmark_group("mpsc");
    group.throughput(Throughput::Elements(SENDERS as u64 * PER_SENDER));
    group.bench_function(Q::NAME, |b| b.iter_custom(|iters| mpsc::<Q>(rt, iters)));
    group.finish();
    let mut group = c.benchmark_group("fanout");
    group.throughput(Throughput::Elements(STREAMS as u64 * EVENTS));
    group.bench_function(Q::NAME, |b| b.iter_custom(|iters| fanout::<Q>(rt, iters)));
    group.finish();
}

fn queues(c: &mut Criterion) {
    let rt = runtime();
    bench::<Genmcp>(c, &rt);
    bench::<Tokio>(c, &rt);
    bench::<AsyncChannel>(c, &rt);
    bench::<Flume>(c, &rt);
}

criterion_group!(benches, queues);
criterion_main!(benches);
