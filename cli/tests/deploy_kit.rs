//! The deployment kit under `deploy/` stays true to the server: every metric
//! the Grafana dashboard and the Prometheus alert rules name is one genmcp
//! exports, every label they use is on a series of a scrape after real traffic, every flag the systemd unit passes is one `genmcp serve` takes, and
//! the unit gives the drain the time it needs before systemd kills the process.

#[path = "../../tests/common/mod.rs"]
mod common;

use std::collections::BTreeSet;
use std::process::Command;
use std::sync::Arc;

use genmcp::admin::Admin;
use genmcp::prelude::*;
use genmcp::runtime::Server;
use serde_json::Value;

const DASHBOARD: &str = include_str!("../../deploy/grafana/genmcp-dashboard.json");
const ALERTS: &str = include_str!("../../deploy/prometheus/genmcp-alerts.yml");
const UNIT: &str = include_str!("../../deploy/systemd/genmcp.service");

/// Every series name a scrape of a node with a `bus` readiness check and a
/// suite's spent record can carry, read from the `# TYPE` lines (a counter
/// `x` is written `x_total`; a histogram `x_bucket`, `x_sum`, `x_count`).
fn exported_names() -> BTreeSet<String> {
    let suite = Suite::builder(Implementation::new("kit", "0")).build();
    let admin = Admin::new(
        Server::new(Limits::default()),
        vec![("bus".to_string(), Arc::new(|| true) as _)],
    )
    .with_spent_refusals(suite.spent_refusals());
    let text = admin.metrics_text();
    let mut names = BTreeSet::new();
    for line in text.lines() {
        let Some(rest) = line.strip_prefix("# TYPE ") else {
            continue;
        };
        let mut parts = rest.split_whitespace();
        let (Some(name), Some(kind)) = (parts.next(), parts.next()) else {
            panic!("a TYPE line without a name and a type: {line}");
        };
        match kind {
            "counter" if name.ends_with("_total") => {
                names.insert(name.to_string());
            }
            "counter" => {
                names.insert(format!("{name}_total"));
            }
            "histogram" => {
                for suffix in ["_bucket", "_sum", "_count"] {
                    names.insert(format!("{name}{suffix}"));
                }
            }
            _ => {
                names.insert(name.to_string());
            }
        }
    }
    assert!(
        names.contains("genmcp_streams_open"),
        "the scrape holds the runtime's metrics: {names:?}"
    );
    names
}

/// The metric identifiers an expression names: genmcp's own (`genmcp_*`)
/// and those of the OpenTelemetry MCP conventions (`mcp_server_*`), in order.
fn metric_names(expr: &str) -> Vec<String> {
    // genmcp's own labels (`genmcp_session_kind`) share the prefix.
    let labels = label_names(expr);
    let mut out: Vec<(usize, String)> = ["genmcp_", "mcp_server_"]
        .iter()
        .flat_map(|prefix| names_with(expr, prefix))
        .filter(|(_, name)| !labels.contains(name))
        .collect();
    out.sort();
    out.into_iter().map(|(_, name)| name).collect()
}

/// The identifiers starting with `prefix` in `expr`, with their offsets.
fn names_with(expr: &str, prefix: &str) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    let bytes = expr.as_bytes();
    let mut i = 0;
    while let Some(at) = expr[i..].find(prefix) {
        let start = i + at;
        let boundary =
            start == 0 || !(bytes[start - 1].is_ascii_alphanumeric() || bytes[start - 1] == b'_');
        let mut end = start;
        while end < bytes.len() && (bytes[end].is_ascii_alphanumeric() || bytes[end] == b'_') {
            end += 1;
        }
        if boundary {
            out.push((start, expr[start..end].to_string()));
        }
        i = end;
    }
    out
}

fn dashboard_exprs() -> Vec<String> {
    let dash: Value = serde_json::from_str(DASHBOARD).expect("the dashboard is JSON");
    let panels = dash["panels"].as_array().expect("panels");
    assert!(!panels.is_empty());
    let mut exprs = Vec::new();
    for panel in panels {
        let targets = panel["targets"]
            .as_array()
            .expect("every panel has targets");
        assert!(
            !targets.is_empty(),
            "panel {} queries nothing",
            panel["title"]
        );
        for t in targets {
            exprs.push(t["expr"].as_str().expect("a PromQL expr").to_string());
        }
    }
    exprs
}

/// The `expr:` of every rule, with YAML block scalars (`expr: |`) joined.
fn alert_exprs() -> Vec<(String, String)> {
    let mut rules = Vec::new();
    let mut alert = String::new();
    let mut lines = ALERTS.lines().peekable();
    while let Some(line) = lines.next() {
        let t = line.trim_start();
        if let Some(name) = t.strip_prefix("- alert:") {
            alert = name.trim().to_string();
        } else if let Some(expr) = t.strip_prefix("expr:") {
            let indent = line.len() - t.len();
            let mut text = expr.trim().to_string();
            if text == "|" || text == ">" {
                text.clear();
                while let Some(next) = lines.peek() {
                    let nt = next.trim_start();
                    if !nt.is_empty() && next.len() - nt.len() <= indent {
                        break;
                    }
                    text.push_str(nt);
                    text.push(' ');
                    lines.next();
                }
            }
            assert!(!alert.is_empty(), "an expr outside a rule: {line}");
            rules.push((alert.clone(), text));
        }
    }
    rules
}

#[test]
fn dashboard_and_alerts_name_only_exported_metrics() {
    let exported = exported_names();
    let mut checked = 0;
    let mut named = |source: &str, expr: &str| {
        let names = metric_names(expr);
        assert!(!names.is_empty(), "{source} names no genmcp metric: {expr}");
        for name in names {
            assert!(
                exported.contains(&name),
                "{source} names {name}, which genmcp does not export (exported: {exported:?})"
            );
            checked += 1;
        }
    };
    for expr in dashboard_exprs() {
        named("a dashboard panel", &expr);
    }
    let rules = alert_exprs();
    for wanted in [
        "GenmcpStreamOverflow",
        "GenmcpBusDown",
        "GenmcpNotReady",
        "GenmcpRequestErrors",
        "GenmcpSpentRecordRefusals",
        "McpToolErrors",
        "McpSlowOperations",
    ] {
        assert!(
            rules.iter().any(|(name, _)| name == wanted),
            "the alert rules lack {wanted}"
        );
    }
    for (alert, expr) in &rules {
        named(&format!("alert {alert}"), expr);
    }
    assert!(checked > 20, "only {checked} names checked");
}

/// Every label name of a scrape after real traffic (a tool call, a listen
/// stream ended by shutdown), with those Prometheus adds (`instance`, `job`).
fn scraped_labels() -> BTreeSet<String> {
    let mut config = common::config();
    config.compat = Some(genmcp::http::CompatConfig::default());
    let srv =
        genmcp::http::ServerThread::spawn(|| genmcp_cli::demo::suite().0, config).expect("starts");
    let call = common::call(
        srv.addr,
        serde_json::json!("kit-1"),
        "tools/call",
        serde_json::json!({"name": "add_note", "arguments": {"text": "kit"}}),
    );
    assert_eq!(call.status, 200);
    let mut stream = common::listen(
        srv.addr,
        serde_json::json!("kit-listen"),
        serde_json::json!({"toolsListChanged": true}),
    );
    stream.next_message().expect("ack");
    let admin = Admin::new(
        srv.server.clone(),
        vec![("bus".to_string(), Arc::new(|| true) as _)],
    );
    srv.stop();
    stream.next_message().expect("completion");
    let mut text = String::new();
    common::wait_until(std::time::Duration::from_secs(10), || {
        text = admin.metrics_text();
        text.contains("mcp_server_session_duration_seconds_count{")
    });
    let mut labels: BTreeSet<String> = ["instance", "job"].map(String::from).into();
    for line in text.lines().filter(|l| !l.starts_with('#')) {
        let Some((_, rest)) = line.split_once('{') else {
            continue;
        };
        let Some((inside, _)) = rest.rsplit_once('}') else {
            continue;
        };
        for pair in inside.split("\",") {
            if let Some((name, _)) = pair.split_once('=') {
                labels.insert(name.trim_start_matches(',').to_string());
            }
        }
    }
    assert!(labels.contains("mcp_method_name"), "{text}");
    assert!(labels.contains("genmcp_session_kind"), "{text}");
    labels
}

/// The label names an expression uses: in `by (...)`/`without (...)` and in
/// `{name="value"}` matchers.
fn label_names(expr: &str) -> Vec<String> {
    let mut out = Vec::new();
    for keyword in ["by (", "without ("] {
        for (i, _) in expr.match_indices(keyword) {
            let rest = &expr[i + keyword.len()..];
            let inside = rest.split(')').next().unwrap_or("");
            out.extend(inside.split(',').map(|n| n.trim().to_string()));
        }
    }
    let mut rest = expr;
    while let Some(open) = rest.find('{') {
        let Some(close) = rest[open..].find('}') else {
            break;
        };
        let inside = &rest[open + 1..open + close];
        let mut in_quotes = false;
        let mut name = String::new();
        let mut names = Vec::new();
        for c in inside.chars() {
            match c {
                '"' => in_quotes = !in_quotes,
                '=' | '!' | '~' if !in_quotes => {
                    if !name.trim().is_empty() {
                        names.push(name.trim().to_string());
                    }
                    name.clear();
                }
                ',' if !in_quotes => name.clear(),
                _ if !in_quotes => name.push(c),
                _ => {}
            }
        }
        out.extend(names);
        rest = &rest[open + close + 1..];
    }
    out.retain(|n| !n.is_empty());
    out
}

#[test]
fn dashboard_and_alerts_use_only_exported_labels() {
    let labels = scraped_labels();
    let mut exprs = dashboard_exprs();
    exprs.extend(alert_exprs().into_iter().map(|(_, e)| e));
    let mut checked = 0;
    for expr in &exprs {
        for name in label_names(expr) {
            assert!(
                labels.contains(&name),
                "{expr} uses the label {name}, which no genmcp series has ({labels:?})"
            );
            checked += 1;
        }
    }
    assert!(checked > 20, "only {checked} labels checked");
    // The check can fail: a misspelt label is caught.
    let made_up =
        label_names("sum by (le, mcp_method) (rate(x{error_typ=\"1\",instance=~\"$i\"}[5m]))");
    assert_eq!(made_up, ["le", "mcp_method", "error_typ", "instance"]);
    assert!(!labels.contains("mcp_method") && !labels.contains("error_typ"));
}

#[test]
fn a_made_up_metric_is_caught() {
    // The check above must be able to fail: a misspelt name is not exported.
    let exported = exported_names();
    let names = metric_names("rate(genmcp_stream_opened_total[5m]) + genmcp_ready");
    assert_eq!(names, ["genmcp_stream_opened_total", "genmcp_ready"]);
    assert!(!exported.contains(&names[0]));
    assert!(exported.contains(&names[1]));
    // The conventions' names are checked too.
    let names = metric_names(
        "rate(mcp_server_operation_duration_seconds_count[5m]) / mcp_server_operation_seconds_count",
    );
    assert_eq!(
        names,
        [
            "mcp_server_operation_duration_seconds_count",
            "mcp_server_operation_seconds_count"
        ]
    );
    assert!(exported.contains(&names[0]));
    assert!(!exported.contains(&names[1]));
}

#[test]
fn the_systemd_unit_passes_only_real_flags_and_outlasts_the_drain() {
    let exec: String = UNIT
        .lines()
        .skip_while(|l| !l.starts_with("ExecStart="))
        .take_while(|l| !l.trim().is_empty() && !l.starts_with("Environment="))
        .map(|l| l.trim_end_matches('\\').trim())
        .collect::<Vec<_>>()
        .join(" ");
    let args: Vec<&str> = exec.split_whitespace().skip(1).collect();
    assert_eq!(args.iter().filter(|a| **a == "serve").count(), 1, "{exec}");
    let help = |sub: &[&str]| {
        let out = Command::new(env!("CARGO_BIN_EXE_genmcp"))
            .args(sub)
            .arg("--help")
            .output()
            .expect("genmcp --help runs");
        assert!(out.status.success());
        String::from_utf8(out.stdout).expect("UTF-8 help")
    };
    let (global, serve) = (help(&[]), help(&["serve"]));
    let mut flags = 0;
    let mut in_serve = false;
    for arg in &args {
        if *arg == "serve" {
            in_serve = true;
            continue;
        }
        if let Some(flag) = arg.strip_prefix("--") {
            let flag = flag.split('=').next().unwrap_or(flag);
            let text = if in_serve { &serve } else { &global };
            assert!(
                text.contains(&format!("--{flag}")),
                "the unit passes --{flag}, which `genmcp {}--help` does not list",
                if in_serve { "serve " } else { "" }
            );
            flags += 1;
        }
    }
    assert!(flags >= 5, "{exec}");
    assert!(
        exec.contains("--key-file ${CREDENTIALS_DIRECTORY}/"),
        "the key comes as a systemd credential: {exec}"
    );
    assert!(UNIT.contains("LoadCredential=genmcp.key:"));
    assert!(!UNIT.contains("GENMCP_KEY"), "no key in the environment");
    let stop: u64 = UNIT
        .lines()
        .find_map(|l| l.strip_prefix("TimeoutStopSec="))
        .and_then(|v| v.trim().parse().ok())
        .expect("TimeoutStopSec in seconds");
    let drain = HttpConfig::default().drain_timeout.as_secs();
    assert!(
        stop > drain + 5,
        "TimeoutStopSec={stop} must outlast the drain ({drain} s) with room to exit"
    );
    assert!(UNIT.contains("Restart=on-failure"));
}
