#![allow(missing_docs)] // criterion_group! generates an undocumented pub fn
//! `cargo bench --bench fanout`: in-process fan-out, publish → N stream actors →
//! encoded bytes, no sockets (see `genmcp::apps::bench::fanout`), for N = 1, 100
//! and 10,000 on one thread, events published in bursts of 32
//! (`Bus::publish_batch`) and, at 10,000, also one `Bus::publish` per event.
//! Criterion reports notifications per second (one notification = one frame
//! delivered to one stream), so the figure is per core.

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use genmcp::apps::bench::fanout::Fanout;

fn fanout(c: &mut Criterion) {
    let mut group = c.benchmark_group("fanout");
    for streams in [1usize, 100, 10_000] {
        let bench = match Fanout::new(streams) {
            Ok(b) => b,
            Err(e) => panic!("could not open {streams} streams: {e}"),
        };
        group.throughput(Throughput::Elements(streams as u64));
        group.bench_function(format!("{streams} streams"), |b| {
            b.iter_custom(|events| bench.run(events))
        });
        if streams == 10_000 {
            group.bench_function(format!("{streams} streams, one publish per event"), |b| {
                b.iter_custom(|events| bench.run_each(events))
            });
        }
    }
    group.finish();
}

criterion_group!(benches, fanout);
criterion_main!(benches);
