//! The benchmark's smoke test: every mode runs end to end on a tiny load
//! (no timing is asserted; numbers are for `genmcp bench` and `cargo bench`),
//! and what a user keeps of a run (`--json`, `--compare`, `--plot`) is there.

#[path = "../../tests/common/mod.rs"]
mod common;

use std::path::PathBuf;
use std::process::Command;

use genmcp_cli::bench::fanout::Fanout;
use serde_json::Value;

/// A fresh path in the temporary directory for this test's `name`.
fn temp_file(name: &str) -> PathBuf {
    let path = std::env::temp_dir().join(format!("genmcp-bench-{}-{name}", std::process::id()));
    let _ = std::fs::remove_file(&path);
    path
}

fn read_json(path: &PathBuf) -> Value {
    let text = std::fs::read_to_string(path).expect("--json wrote its file");
    serde_json::from_str(&text).expect("--json wrote JSON")
}

const TINY: [&str; 6] = ["--streams", "3", "--events", "40", "--rounds", "2"];

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
fn the_tasks_mode_sees_every_task_finished_and_its_record_still_kept() {
    let report = bench(&["--mode", "tasks", "--tasks", "200", "--rounds", "1"]);
    let rows: Vec<&str> = report.lines().filter(|l| l.starts_with("1 |")).collect();
    assert_eq!(rows.len(), 1, "{report}");
    let cells: Vec<&str> = rows[0].split(" | ").collect();
    // round, idle, with tasks, ratio, delta, bytes per task, completed, still kept, tasks/s
    assert_eq!(cells.len(), 9, "{report}");
    assert_eq!(cells[6], "200/200", "every task seen completed: {report}");
    assert_eq!(cells[7], "100/100", "every second task read back: {report}");
    assert!(cells[1].parse::<u64>().is_ok_and(|kib| kib > 0), "{report}");
    assert!(
        report.contains("median bytes per finished task:"),
        "{report}"
    );
}

#[test]
fn the_tasks_flag_and_the_stream_flags_stay_in_their_modes() {
    for (args, says) in [
        (&["--tasks", "5"][..], "--tasks: only with --mode tasks"),
        (
            &["--mode", "tasks", "--streams", "3", "--json", "x.json"],
            "--streams, --json: only with the stream modes",
        ),
    ] {
        let out = Command::new(env!("CARGO_BIN_EXE_genmcp"))
            .arg("bench")
            .args(args)
            .output()
            .expect("genmcp bench runs");
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains(says), "{args:?}: {stderr}");
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
fn a_baseline_is_refused_where_no_baseline_runs() {
    // --url drives one server, --cross-node compares nodes: neither starts a baseline.
    for other in [
        &["--url", "http://127.0.0.1:9/mcp"][..],
        &["--cross-node", "redis://127.0.0.1:9"][..],
    ] {
        let out = Command::new(env!("CARGO_BIN_EXE_genmcp"))
            .args(["bench", "--baseline", "actor-hop"])
            .args(other)
            .output()
            .expect("genmcp bench runs");
        assert_eq!(out.status.code(), Some(2), "{other:?}");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            stderr.contains("'--baseline <BASELINE>' cannot be used with"),
            "{other:?}: {stderr}"
        );
    }
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

#[test]
fn json_output_holds_every_round_the_summary_the_command_and_the_machine() {
    let path = temp_file("rounds.json");
    let file = path.to_str().expect("utf-8 path");
    let report = bench(&[&TINY[..], &["--json", file]].concat());
    let doc = read_json(&path);
    assert_eq!(doc["format"], "genmcp-bench/1");
    let rounds = doc["rounds"].as_array().expect("rounds");
    assert_eq!(rounds.len(), 2, "{doc}");
    for (i, round) in rounds.iter().enumerate() {
        assert_eq!(round["round"], i + 1);
        for server in ["baseline", "genmcp"] {
            assert_eq!(round[server]["frames"], 3 * 40, "{round}");
            assert!(
                round[server]["frames_per_sec"].as_f64().unwrap_or(0.0) > 0.0,
                "{round}"
            );
        }
        assert!(round["ratio"].as_f64().is_some(), "{round}");
    }
    let summary = &doc["summary"];
    for key in [
        "baseline.frames_per_sec",
        "genmcp.frames_per_sec",
        "ratio genmcp/baseline",
    ] {
        assert!(
            summary[key].as_f64().is_some(),
            "summary lacks {key}: {summary}"
        );
    }
    let median = summary["ratio genmcp/baseline"].as_f64().unwrap_or(0.0);
    assert!(
        report.contains(&format!("median ratio genmcp/baseline: {median:.2}")),
        "the file's summary is the printed one: {report} vs {median}"
    );
    let command: Vec<&str> = doc["command"]
        .as_array()
        .expect("command")
        .iter()
        .filter_map(Value::as_str)
        .collect();
    assert_eq!(
        &command[1..],
        &[&["bench"][..], &TINY[..], &["--json", file]].concat()[..]
    );
    assert_eq!(doc["config"]["streams"], 3);
    assert_eq!(doc["config"]["events"], 40);
    assert_eq!(doc["versions"]["genmcp"], env!("CARGO_PKG_VERSION"));
    assert!(
        doc["machine"]["cores"].as_u64().unwrap_or(0) >= 1,
        "{}",
        doc["machine"]
    );
    assert!(doc["machine"]["kernel"].is_string(), "{}", doc["machine"]);
    let _ = std::fs::remove_file(&path);
}

#[test]
fn the_actor_hop_baseline_forwards_every_frame_in_bursts_larger_than_its_queues() {
    // 2,000 events a stream is 30 times what the hop's inbox and outbox (64
    // each) hold: its actor waits for room in the outbox, and nothing is lost.
    let path = temp_file("hop.json");
    let file = path.to_str().expect("utf-8 path");
    let report = bench(&[
        "--baseline",
        "actor-hop",
        "--streams",
        "3",
        "--events",
        "2000",
        "--rounds",
        "1",
        "--json",
        file,
    ]);
    assert!(
        report.contains("baseline (raw SSE, actor hop)"),
        "the table names the baseline: {report}"
    );
    let doc = read_json(&path);
    assert_eq!(doc["config"]["baseline"], "actor-hop", "{}", doc["config"]);
    for server in ["baseline", "genmcp"] {
        assert_eq!(doc["rounds"][0][server]["frames"], 3 * 2000, "{doc}");
    }
    let _ = std::fs::remove_file(&path);
}

#[test]
fn compare_prints_before_after_and_ratio_of_every_summary_figure() {
    let path = temp_file("before.json");
    let file = path.to_str().expect("utf-8 path");
    bench(&[&TINY[..], &["--json", file]].concat());
    let before = read_json(&path);
    let report = bench(&[&TINY[..], &["--compare", file]].concat());
    assert!(
        report.contains("metric | before | after | after/before"),
        "{report}"
    );
    for (metric, value) in before["summary"].as_object().expect("summary") {
        let line = report
            .lines()
            .find(|l| l.starts_with(&format!("{metric} |")))
            .unwrap_or_else(|| panic!("no line for {metric}: {report}"));
        let cells: Vec<&str> = line.split(" | ").collect();
        assert_eq!(cells.len(), 4, "{line}");
        let printed_before: f64 = cells[1].parse().expect("a number");
        let after: f64 = cells[2].parse().expect("a number");
        let ratio: f64 = cells[3]
            .split(' ')
            .next()
            .and_then(|r| r.parse().ok())
            .expect("a ratio");
        let was = value.as_f64().expect("a number");
        assert!(
            (printed_before - was).abs() <= was.abs() * 0.01 + 0.001,
            "{line} vs {was}"
        );
        assert!((ratio - after / printed_before).abs() < 0.01, "{line}");
    }
    let _ = std::fs::remove_file(&path);
}

#[test]
fn compare_refuses_a_file_that_is_not_a_bench_run_before_measuring() {
    let path = temp_file("not-a-run.json");
    std::fs::write(&path, r#"{"rounds": []}"#).expect("written");
    let out = Command::new(env!("CARGO_BIN_EXE_genmcp"))
        .args(["bench", "--compare"])
        .arg(&path)
        .output()
        .expect("genmcp bench runs");
    assert!(!out.status.success());
    assert!(out.stdout.is_empty(), "nothing was measured");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("not a `genmcp bench --json` file"),
        "{stderr}"
    );
    let _ = std::fs::remove_file(&path);
}

fn assert_svg_with_series(path: &PathBuf, series: &[&str]) -> String {
    let svg = std::fs::read_to_string(path).expect("--plot wrote its file");
    assert!(
        svg.trim_start().starts_with("<svg") && svg.trim_end().ends_with("</svg>"),
        "a whole SVG document: {}",
        &svg[..svg.len().min(200)]
    );
    assert_eq!(
        svg.matches("<text").count(),
        svg.matches("</text>").count(),
        "text elements are closed"
    );
    for name in series {
        assert!(
            svg.contains(&format!(">\n{name}\n</text>")),
            "the series {name} is named in the legend"
        );
    }
    svg
}

#[test]
fn plot_draws_throughput_per_round_and_latency_percentiles_beside_the_baseline() {
    let path = temp_file("throughput.svg");
    bench(&[&TINY[..], &["--plot", path.to_str().expect("utf-8 path")]].concat());
    let svg = assert_svg_with_series(&path, &["baseline (raw SSE)", "genmcp"]);
    assert!(
        svg.contains(">\nframes per second\n</text>"),
        "the axis is named"
    );
    let _ = std::fs::remove_file(&path);

    let path = temp_file("latency.svg");
    bench(&[
        "--mode",
        "latency",
        "--streams",
        "2",
        "--events",
        "10",
        "--rate",
        "100",
        "--rounds",
        "2",
        "--plot",
        path.to_str().expect("utf-8 path"),
    ]);
    let svg = assert_svg_with_series(
        &path,
        &[
            "baseline (raw SSE)",
            "genmcp",
            "genmcp p99",
            "baseline (raw SSE) p50",
        ],
    );
    for label in ["p50", "p90", "p99", "p99.9", "max"] {
        assert!(
            svg.contains(&format!(">{label}<")) || svg.contains(label),
            "percentile {label} on the axis"
        );
    }
    let _ = std::fs::remove_file(&path);
}
