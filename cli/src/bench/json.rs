//! `--json FILE` and `--compare FILE`: a run as a JSON document (every
//! round, the summary, the command line, versions and machine facts), and
//! the change of one run's summary against another's.
//!
//! The document (format `genmcp-bench/1`):
//!
//! ```json
//! {
//!   "format": "genmcp-bench/1",
//!   "command": ["genmcp", "bench", "--streams", "100"],
//!   "started_utc": "2026-12-01T16:00:00Z", "started_unix": 1795968000, "finished_unix": 1795968012,
//!   "versions": {"genmcp": "0.1.0", "rustc": null, "profile": "release"},
//!   "machine": {"cores": 2, "cpu": "...", "memory_kib": 24684000, "kernel": "6.1.0", "loadavg": "0.52 0.61 0.70"},
//!   "config": {"mode": "throughput", "kind": "tools/list_changed", "streams": 100, "events": 10000, ...},
//!   "columns": [{"key": "baseline", "title": "baseline (raw SSE)"}, {"key": "genmcp", "title": "genmcp"}],
//!   "rounds": [{"round": 1, "baseline": {"frames_per_sec": 2.1e6, ...}, "genmcp": {...}, "ratio": 0.93}],
//!   "summary": {"baseline.frames_per_sec": 2.1e6, "genmcp.frames_per_sec": 1.9e6, "ratio genmcp/baseline": 0.93}
//! }
//! ```
//!
//! Every summary entry is the median over the rounds.

use std::path::Path;
use std::time::{SystemTime, UNIX_EPOCH};

use serde_json::{Map, Value, json};

use super::report::{kind_name, median, mode_name};
use super::{BenchConfig, Mode, Sample, servers};

/// The `format` of the documents this version writes.
pub const FORMAT: &str = "genmcp-bench/1";

/// Seconds since the Unix epoch.
pub fn now_unix() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// `YYYY-MM-DDTHH:MM:SSZ` for Unix seconds (proleptic Gregorian, UTC): the
/// tasks' timestamp format without its milliseconds.
pub fn utc(secs: u64) -> String {
    let stamp = genmcp::suite::tasks::iso8601(secs.saturating_mul(1_000));
    stamp
        .strip_suffix(".000Z")
        .map_or(stamp.clone(), |s| format!("{s}Z"))
}

fn ms(d: std::time::Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

/// The metrics of a mode: name in the JSON file, value, larger is better.
type Metric = (&'static str, fn(&Sample) -> f64, bool);

fn metrics(mode: Mode) -> &'static [Metric] {
    match mode {
        Mode::Throughput => &[("frames_per_sec", |s| s.frames_per_sec, true)],
        Mode::Latency => &[
            ("p50_ms", |s| ms(s.p50), false),
            ("p90_ms", |s| ms(s.p90), false),
            ("p99_ms", |s| ms(s.p99), false),
            ("p999_ms", |s| ms(s.p999), false),
            ("max_ms", |s| ms(s.max), false),
        ],
        Mode::Memory => &[("kib_per_stream", |s| s.kib_per_stream, false)],
    }
}

/// One sample as JSON: the mode's metrics, and how it was measured.
pub fn sample(mode: Mode, s: &Sample) -> Value {
    let mut o = Map::new();
    for (name, value, _) in metrics(mode) {
        o.insert((*name).into(), json!(value(s)));
    }
    match mode {
        Mode::Throughput => {
            o.insert("frames".into(), json!(s.frames));
            o.insert("elapsed_ms".into(), json!(ms(s.elapsed)));
            o.insert("client_cpu_cores".into(), json!(s.client_cpu));
        }
        Mode::Latency => {
            o.insert("frames".into(), json!(s.frames));
            o.insert("elapsed_ms".into(), json!(ms(s.elapsed)));
            o.insert("client_cpu_cores".into(), json!(s.client_cpu));
        }
        Mode::Memory => {
            o.insert("open_ms".into(), json!(ms(s.elapsed)));
        }
    }
    Value::Object(o)
}

fn first_line_with(path: &str, prefix: &str) -> Option<String> {
    std::fs::read_to_string(path).ok().and_then(|s| {
        s.lines().find(|l| l.starts_with(prefix)).map(|l| {
            l[prefix.len()..]
                .trim()
                .trim_start_matches(':')
                .trim()
                .to_owned()
        })
    })
}

/// What the machine is (Linux: from /proc; `null` where unknown).
pub fn machine() -> Value {
    let read = |p: &str| std::fs::read_to_string(p).ok().map(|s| s.trim().to_owned());
    json!({
        "cores": std::thread::available_parallelism().map_or(0, |n| n.get()),
        "cpu": first_line_with("/proc/cpuinfo", "model name"),
        "memory_kib": first_line_with("/proc/meminfo", "MemTotal")
            .and_then(|v| v.split_whitespace().next().and_then(|n| n.parse::<u64>().ok())),
        "kernel": read("/proc/sys/kernel/osrelease"),
        "os": std::env::consts::OS,
        "arch": std::env::consts::ARCH,
        "loadavg": read("/proc/loadavg"),
    })
}

/// The versions that produced the numbers. `rustc` is the compiler's
/// version when the build set `GENMCP_RUSTC_VERSION` (e.g.
/// `GENMCP_RUSTC_VERSION="$(rustc -V)" cargo build --release`).
pub fn versions() -> Value {
    json!({
        "genmcp": env!("CARGO_PKG_VERSION"),
        "rustc": option_env!("GENMCP_RUSTC_VERSION"),
        "rust_version_required": option_env!("CARGO_PKG_RUST_VERSION"),
        "profile": if cfg!(debug_assertions) { "debug" } else { "release" },
    })
}

fn config(cfg: &BenchConfig) -> Value {
    json!({
        "mode": mode_name(cfg.mode),
        "kind": kind_name(cfg.kind),
        // No baseline runs beside `--url` or `--cross-node`.
        "baseline": (cfg.url.is_none() && cfg.cross_node.is_none())
            .then(|| cfg.baseline.name()),
        "streams": cfg.streams,
        "events": cfg.events,
        "rounds": cfg.rounds,
        "rate": (cfg.mode == Mode::Latency).then_some(cfg.rate),
        "url": cfg.url,
        "cross_node": cfg.cross_node,
        "client_threads": cfg.client_threads,
        "server_workers": servers::workers_for(cfg.streams),
    })
}

/// The medians over the rounds: `COLUMN.METRIC` for each column, and the
/// median ratio.
fn summary(cfg: &BenchConfig, results: &super::Results) -> Value {
    let mut o = Map::new();
    for (c, key) in results.keys.iter().enumerate() {
        for (name, value, _) in metrics(cfg.mode) {
            let values = results.rounds.iter().map(|r| value(&r[c])).collect();
            o.insert(format!("{key}.{name}"), json!(median(values)));
        }
    }
    if let (Some(name), Some(m)) = (results.ratio_name(), median(results.ratios(cfg.mode))) {
        o.insert(format!("ratio {name}"), json!(m));
    }
    Value::Object(o)
}

/// The whole run as a JSON document (see the module docs).
pub fn document(
    cfg: &BenchConfig,
    results: &super::Results,
    command: &[String],
    started: u64,
) -> Value {
    let ratios = results.ratios(cfg.mode);
    let rounds: Vec<Value> = results
        .rounds
        .iter()
        .enumerate()
        .map(|(i, r)| {
            let mut o = Map::new();
            o.insert("round".into(), json!(i + 1));
            for (key, s) in results.keys.iter().zip(r) {
                o.insert((*key).into(), sample(cfg.mode, s));
            }
            if let Some(ratio) = ratios.get(i) {
                o.insert("ratio".into(), json!(ratio));
            }
            Value::Object(o)
        })
        .collect();
    let columns: Vec<Value> = results
        .keys
        .iter()
        .zip(&results.titles)
        .map(|(k, t)| json!({"key": k, "title": t}))
        .collect();
    json!({
        "format": FORMAT,
        "command": command,
        "started_utc": utc(started),
        "started_unix": started,
        "finished_unix": now_unix(),
        "versions": versions(),
        "machine": machine(),
        "config": config(cfg),
        "columns": columns,
        "rounds": rounds,
        "summary": summary(cfg, results),
    })
}

/// Reads a document written by `--json`.
pub fn read(path: &Path) -> Result<Value, String> {
    let text =
        std::fs::read_to_string(path).map_err(|e| format!("--compare {}: {e}", path.display()))?;
    let doc: Value = serde_json::from_str(&text)
        .map_err(|e| format!("--compare {}: not JSON: {e}", path.display()))?;
    if doc.get("format").and_then(Value::as_str) != Some(FORMAT)
        || !doc.get("summary").is_some_and(Value::is_object)
    {
        return Err(format!(
            "--compare {}: not a `genmcp bench --json` file ({FORMAT})",
            path.display()
        ));
    }
    Ok(doc)
}

/// Whether larger is better for a summary entry.
/// A ratio of throughputs: larger is better; of latencies or memory: smaller.
fn larger_is_better(metric: &str, throughput: bool) -> bool {
    if metric.starts_with("ratio ") {
        return throughput;
    }
    metric.ends_with(".frames_per_sec")
}

/// `run`'s config entry `key`. A file written before `--baseline` existed
/// has no `baseline`: its run compared with the raw server, unless it drove
/// `--url` or `--cross-node`, where no baseline runs.
fn config_value(run: &Value, key: &str) -> Value {
    let config = &run["config"];
    match config.get(key) {
        None if key == "baseline" && config["url"].is_null() && config["cross_node"].is_null() => {
            json!("raw")
        }
        None => Value::Null,
        Some(v) => v.clone(),
    }
}

/// The change from `before` to `after` (two documents), one line per
/// summary entry present in both: before, after, after/before.
pub fn compare(before: &Value, after: &Value, before_name: &str) -> String {
    let describe = |d: &Value| {
        let c = &d["config"];
        format!(
            "{} {} · {} streams × {} events · {}",
            d["started_utc"].as_str().unwrap_or("?"),
            c["mode"].as_str().unwrap_or("?"),
            c["streams"],
            c["events"],
            c["kind"].as_str().unwrap_or("?"),
        )
    };
    let mut out = format!(
        "change against {before_name}\nbefore: {}\nafter:  {}\n",
        describe(before),
        describe(after)
    );
    for key in [
        "mode", "kind", "baseline", "streams", "events", "rate", "url",
    ] {
        let (b, a) = (config_value(before, key), config_value(after, key));
        if b != a {
            out.push_str(&format!("note: {key} differs ({b} before, {a} after)\n",));
        }
    }
    out.push_str("metric | before | after | after/before\n");
    let throughput = after["config"]["mode"] == "throughput";
    let (Some(b), Some(a)) = (before["summary"].as_object(), after["summary"].as_object()) else {
        return out;
    };
    for (metric, after_value) in a {
        let (Some(x), Some(y)) = (b.get(metric).and_then(Value::as_f64), after_value.as_f64())
        else {
            continue;
        };
        let ratio = y / x;
        let better = larger_is_better(metric, throughput);
        let verdict = if (ratio - 1.0).abs() < 0.005 {
            "same"
        } else if (ratio > 1.0) == better {
            "better"
        } else {
            "worse"
        };
        out.push_str(&format!(
            "{metric} | {} | {} | {ratio:.3} ({verdict})\n",
            number(x),
            number(y)
        ));
    }
    out
}

fn number(x: f64) -> String {
    if x.abs() >= 1_000.0 {
        format!("{x:.0}")
    } else {
        format!("{x:.3}")
    }
}

#[cfg(test)]
mod tests {
    use super::{compare, utc};
    use serde_json::{Value, json};

    fn run(config: Value) -> Value {
        json!({"config": config, "summary": {}})
    }

    #[test]
    fn a_file_from_before_the_baseline_flag_ran_against_the_raw_server() {
        let old = run(json!({"mode": "throughput", "url": null, "cross_node": null}));
        let note = |after: Value| compare(&old, &run(after), "old.json").contains("note: baseline");
        let new = |baseline: Value| json!({"mode": "throughput", "baseline": baseline, "url": null, "cross_node": null});
        assert!(!note(new(json!("raw"))), "the same baseline");
        assert!(note(new(json!("actor-hop"))), "another baseline");
        // Beside --url no baseline runs, then or now.
        let old_url = run(json!({"mode": "throughput", "url": "http://h/mcp", "cross_node": null}));
        let new_url = run(
            json!({"mode": "throughput", "baseline": null, "url": "http://h/mcp", "cross_node": null}),
        );
        assert!(!compare(&old_url, &new_url, "old.json").contains("note: baseline"));
    }

    #[test]
    fn unix_seconds_read_as_utc_dates() {
        assert_eq!(utc(0), "1970-01-01T00:00:00Z");
        assert_eq!(utc(951_827_696), "2000-02-29T12:34:56Z");
        assert_eq!(utc(1_764_547_200), "2025-12-01T00:00:00Z");
    }
}
