#![allow(missing_docs)] // criterion_group! generates an undocumented pub fn
//! `cargo bench --bench fanout`: in-process fan-out, publish → N stream actors →
//! encoded bytes, no sockets (see `genmcp_cli::bench::fanout`), for N = 1, 100
//! and 10,000 on one thread, events published in bursts of 32
//! (`Bus::publish_batch`) and, at 10,000, also one `Bus::publish` per event.
//! Criterion reports notifications per second (one notification = one frame
//! delivered to one stream), so the figure is per core.

use criterion::{Criterion, Throughput, criterion_group};
use genmcp_cli::bench::fanout::Fanout;

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

/// `cargo bench --bench fanout -- --count EVENTS STREAMS [each]`: instead of
/// criterion, open STREAMS streams, publish EVENTS events to them (in bursts of
/// 32 with `publish_batch`, or one `publish` per event with `each`) and exit,
/// for an instruction counter, which a shared machine's noise does not move:
///
/// ```text
/// valgrind --tool=callgrind target/release/deps/fanout-HASH --count 64 10000 each
/// ```
///
/// The difference between two counts (EVENTS and 0) divided by EVENTS ×
/// STREAMS is the instructions per notification.
fn count(args: &[String]) {
    // `cargo bench` adds `--bench` after the arguments it passes on.
    let args: Vec<&String> = args.iter().filter(|a| !a.starts_with("--")).collect();
    let (Some(events), Some(streams)) = (
        args.first().and_then(|n| n.parse::<u64>().ok()),
        args.get(1).and_then(|n| n.parse::<usize>().ok()),
    ) else {
        eprintln!("--count EVENTS STREAMS [each]: EVENTS and STREAMS are numbers");
        std::process::exit(2);
    };
    let bench = match Fanout::new(streams) {
        Ok(b) => b,
        Err(e) => panic!("could not open {streams} streams: {e}"),
    };
    match args.get(2).map(|a| a.as_str()) {
        None => drop(bench.run(events)),
        Some("each") => drop(bench.run_each(events)),
        Some(other) => {
            eprintln!("--count EVENTS STREAMS [each]: not {other:?}");
            std::process::exit(2);
        }
    }
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    match args.iter().position(|a| a == "--count") {
        Some(i) => count(&args[i + 1..]),
        None => {
            benches();
            Criterion::default().configure_from_args().final_summary();
        }
    }
}
