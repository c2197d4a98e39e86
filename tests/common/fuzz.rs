//! The seeded proptest runner of the fuzz tests, loaded with `#[path]` by
//! `fuzz_decoders.rs` and `fuzz_stdio.rs`.

use proptest::test_runner::{Config, RngAlgorithm, TestRng, TestRunner};

/// A runner with a fixed seed (`seed` repeated) so `cargo test` is
/// reproducible; `PROPTEST_CASES` overrides the case count.
pub fn runner(cases: u32, seed: u8) -> TestRunner {
    let cases = std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(cases);
    let config = Config {
        cases,
        failure_persistence: None,
        ..Config::default()
    };
    TestRunner::new_with_rng(
        config,
        TestRng::from_seed(RngAlgorithm::ChaCha, &[seed; 32]),
    )
}
