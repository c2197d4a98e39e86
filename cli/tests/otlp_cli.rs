//! `genmcp serve --otlp URL`: the binary exports its request spans to the
//! collector at URL, continuing the client's trace from `_meta.traceparent`,
//! and sends what it buffered before it exits (here: stdin closed on the
//! stdio transport, which leaves with `process::exit`).

#[path = "../../tests/common/mod.rs"]
mod common;
#[path = "../../tests/common/otlp_receiver.rs"]
mod otlp_receiver;

use std::time::Duration;

use common::stdio_child::Peer;
use otlp_receiver::{attr, hex, receiver, spans};
use serde_json::json;

const TRACE_ID: &str = "4bf92f3577b34da6a3ce929d0e0e4736";
const PARENT_ID: &str = "00f067aa0ba902b7";
const SECRET: &str = "note-text-never-exported";

#[test]
fn serve_with_otlp_exports_the_call_span_parented_on_the_clients_trace() {
    let (collector, received) = receiver();
    let url = format!("http://{collector}");
    let mut peer = Peer::start_with(&["serve", "--stdio", "--otlp", &url]);
    let mut meta = common::meta();
    meta["traceparent"] = json!(format!("00-{TRACE_ID}-{PARENT_ID}-01"));
    peer.request(
        json!("cli-1"),
        "tools/call",
        json!({"name": "add_note", "arguments": {"text": SECRET}, "_meta": meta}),
    );
    let answer = peer.next();
    assert_eq!(answer["id"], "cli-1");
    assert!(answer["result"].is_object(), "{answer}");
    peer.close_stdin();
    let status = peer.child.wait().expect("exits");
    assert!(status.success(), "{status:?}");

    // Sent before the process left: no wait for a periodic export needed, but
    // the receiver's threads may still be storing it.
    let mut found = Vec::new();
    common::wait_until(Duration::from_secs(10), || {
        found = spans(&received);
        !found.is_empty()
    });
    let call = found
        .iter()
        .find(|s| s.name == "tools/call add_note")
        .unwrap_or_else(|| panic!("no call span in {found:#?}"));
    assert_eq!(hex(&call.trace_id), TRACE_ID);
    assert_eq!(hex(&call.parent_span_id), PARENT_ID);
    assert_eq!(
        attr(&call.attributes, "network.transport").as_deref(),
        Some("pipe")
    );
    assert_eq!(
        attr(&call.attributes, "jsonrpc.request.id").as_deref(),
        Some("cli-1")
    );
    for (path, body) in received.lock().unwrap().iter() {
        assert!(
            !String::from_utf8_lossy(body).contains(SECRET),
            "an argument in {path}"
        );
    }
}

#[test]
fn serve_refuses_an_https_otlp_endpoint_it_cannot_reach() {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_genmcp"))
        .args(["serve", "--stdio", "--otlp", "https://127.0.0.1:4318"])
        .stdin(std::process::Stdio::null())
        .output()
        .expect("runs");
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("only http:// is supported"), "{stderr}");
}

/// `genmcp serve --stdio` with `env` set, one `tools/call` on stdin, then EOF.
fn serve_stdio_once(env: &[(&str, &str)]) -> std::process::Output {
    use std::io::Write as _;
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_genmcp"))
        .args(["serve", "--stdio"])
        .envs(env.iter().copied())
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("starts");
    let call = common::request(
        json!("env-1"),
        "tools/call",
        json!({"name": "add_note", "arguments": {"text": SECRET}}),
    );
    let mut answer = String::new();
    if let Some(mut stdin) = child.stdin.take() {
        // The process may already have exited (a refused configuration).
        if stdin.write_all(format!("{call}\n").as_bytes()).is_ok()
            && let Some(stdout) = child.stdout.as_mut()
        {
            // Its answer before EOF (EOF cancels what is in flight).
            let _ = std::io::BufRead::read_line(&mut std::io::BufReader::new(stdout), &mut answer);
        }
    }
    let mut out = child.wait_with_output().expect("exits");
    out.stdout.splice(0..0, answer.into_bytes());
    out
}

#[test]
fn a_metrics_endpoint_alone_exports_metrics_only() {
    let (collector, received) = receiver();
    let out = serve_stdio_once(&[(
        "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT",
        &format!("http://{collector}/v1/metrics"),
    )]);
    assert!(out.status.success(), "{out:?}");
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("env-1"),
        "{out:?}"
    );
    let got_metrics = common::wait_until(Duration::from_secs(10), || {
        received
            .lock()
            .unwrap()
            .iter()
            .any(|(p, _)| p == "/v1/metrics")
    });
    assert!(got_metrics, "no metrics exported");
    assert!(
        received
            .lock()
            .unwrap()
            .iter()
            .all(|(p, _)| p == "/v1/metrics"),
        "traces were exported without a traces endpoint"
    );
}

#[test]
fn serve_refuses_an_otlp_protocol_it_does_not_speak() {
    let out = serve_stdio_once(&[
        ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:4317"),
        ("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc"),
    ]);
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("only http/protobuf"), "{stderr}");
}
