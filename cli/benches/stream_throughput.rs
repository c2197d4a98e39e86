//! `cargo bench --bench stream_throughput`: `genmcp bench` (throughput, 100
//! streams × 1,000 events, against the raw-SSE baseline in the same run; see
//! `genmcp_cli::bench`). Environment: `BENCH_STREAMS`, `BENCH_EVENTS`,
//! `BENCH_ROUNDS`.

use genmcp_cli::bench::{BenchConfig, report, run};

fn env(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn main() {
    // `cargo bench` passes `--bench`; `cargo test --benches` passes nothing and
    // must not spend minutes here: one tiny round proves the harness works.
    let quick = !std::env::args().any(|a| a == "--bench");
    let mut cfg = BenchConfig::default();
    cfg.streams = env("BENCH_STREAMS", if quick { 4 } else { cfg.streams });
    cfg.events = env("BENCH_EVENTS", if quick { 50 } else { cfg.events });
    cfg.rounds = env("BENCH_ROUNDS", if quick { 1 } else { cfg.rounds });
    match run(std::path::Path::new(env!("CARGO_BIN_EXE_genmcp")), &cfg) {
        Ok(rounds) => print!("{}", report(&cfg, &rounds)),
        Err(e) => {
            eprintln!("benchmark failed: {e}");
            std::process::exit(1);
        }
    }
}
