//! The benchmark's smoke test: every mode runs end to end on a tiny load
//! (no timing is asserted; numbers are for `genmcp bench` and `cargo bench`).

mod common;

use std::process::Command;

use genmcp::apps::bench::fanout::Fanout;

fn bench(args: &[&str]) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_genmcp"))
        .arg("bench")
        .args(args)
        .output()
        .expect("genmcp bench runs");
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "genmcp bench {args:?} failed: {text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    text
}

#[test]
fn the_cross_node_mode_measures_one_node_and_three_behind_a_real_redis() {
    let redis = common::redis_server::RedisServer::start();
    let url = redis.url();
    for mode in ["throughput", "latency"] {
        let report = bench(&[
            "--cross-node",
            &url,
            "--mode",
            mode,
            "--streams",
            "4",
            "--events",
            "20",
            "--rate",
            "100",
            "--rounds",
            "1",
        ]);
        assert!(report.contains("median ratio three/one:"), "{report}");
        assert_eq!(report.lines().filter(|l| l.starts_with("1 |")).count(), 1);
    }
}

#[test]
fn every_mode_and_kind_measures_both_servers_and_reports_a_ratio() {
    for args in [
        &["--streams", "3", "--events", "20", "--rounds", "1"][..],
        &[
            "--kind",
            "resources",
            "--streams",
            "3",
            "--events",
            "20",
            "--rounds",
            "1",
        ],
        &[
            "--mode",
            "latency",
            "--streams",
            "2",
            "--events",
            "5",
            "--rate",
            "50",
            "--rounds",
            "1",
        ],
        &["--mode", "memory", "--streams", "20", "--rounds", "1"],
    ] {
        let report = bench(args);
        assert!(
            report.contains("median ratio genmcp/baseline:"),
            "{args:?}: {report}"
        );
        assert_eq!(report.lines().filter(|l| l.starts_with("1 |")).count(), 1);
    }
}

#[test]
fn bad_arguments_are_refused_with_usage() {
    let out = Command::new(env!("CARGO_BIN_EXE_genmcp"))
        .args(["bench", "--mode", "nope"])
        .output()
        .expect("genmcp bench runs");
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("invalid value 'nope' for '--mode <MODE>'")
            && stderr.contains("throughput, latency, memory"),
        "the error names the flag and its choices: {stderr}"
    );
}

#[test]
fn in_process_fanout_encodes_every_frame_for_every_stream() {
    let fanout = Fanout::new(50).expect("streams open");
    assert_eq!(fanout.frames(), 50, "one acknowledgement per stream");
    fanout.run(70);
    assert_eq!(fanout.frames(), 50 + 50 * 70);
    assert!(
        fanout.bytes() > 50 * 70 * 60,
        "each frame is a whole notification"
    );
}
