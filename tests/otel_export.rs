//! OTLP export (feature `otel`) end to end: a real server, a real client call
//! carrying a W3C `traceparent` in `_meta`, and an OTLP/HTTP receiver in the
//! test decoding what arrives with `opentelemetry-proto`. The span continues
//! the client's trace (trace id, parent), is named `{method} {target}` with
//! the conventions' attributes, the duration histogram arrives with its
//! attributes, and nothing sensitive (arguments, results, tokens) is
//! exported.

mod common;
#[path = "common/otlp_receiver.rs"]
mod otlp_receiver;

use std::sync::OnceLock;
use std::time::Duration;

use common::{headers, post, request};
use genmcp::otel::{Otel, OtelConfig};
use genmcp::prelude::*;
use opentelemetry_proto::tonic::collector::metrics::v1::ExportMetricsServiceRequest;
use opentelemetry_proto::tonic::metrics::v1::metric;
use otlp_receiver::{Received, attr, hex, receiver, spans};
use prost::Message as _;
use serde_json::{Value, json};
use tracing_subscriber::layer::SubscriberExt as _;
use tracing_subscriber::util::SubscriberInitExt as _;

/// Only ever in tool arguments (and so in the echo's result).
const SECRET: &str = "s3cret-argument-never-exported";
/// Only ever in an `Authorization` header.
const TOKEN: &str = "bearer-token-never-exported";

const TRACE_ID: &str = "4bf92f3577b34da6a3ce929d0e0e4736";
const PARENT_ID: &str = "00f067aa0ba902b7";
const HEADER_TRACE_ID: &str = "0af7651916cd43dd8448eb211c80319c";
const HEADER_PARENT_ID: &str = "b7ad6b7169203331";
const LISTEN_TRACE_ID: &str = "11112222333344445555666677778888";
const LISTEN_HEADER_TRACE_ID: &str = "99990000aaaabbbbccccddddeeeeffff";
const LEGACY_TRACE_ID: &str = "0123456789abcdef0123456789abcdef";

/// The demo suite (its listen streams) plus an `echo` tool.
fn suite() -> Suite<genmcp_cli::demo::NotesSubscriptions> {
    let (suite, _bus) = genmcp_cli::demo::suite();
    suite.catalog().add_tool(
        ToolBuilder::new("echo")
            .description("echoes its arguments")
            .handler(|c| async move {
                Ok(CallToolResult::text(Value::Object(c.arguments).to_string()).into())
            }),
    );
    suite
}

/// The process's exporter, sending to the in-test receiver, and what the
/// receiver got.
fn exporter() -> &'static (Otel, Received) {
    static EXPORTER: OnceLock<(Otel, Received)> = OnceLock::new();
    EXPORTER.get_or_init(|| {
        let (collector, received) = receiver();
        let otel = Otel::init(OtelConfig::from_env().endpoint(format!("http://{collector}")))
            .expect("OTLP exporters");
        tracing_subscriber::registry().with(otel.layer()).init();
        (otel, received)
    })
}

#[test]
fn a_call_with_a_traceparent_is_exported_as_a_child_span_with_its_duration_metric() {
    let (otel, received) = exporter();

    let mut config = common::config();
    config.compat = Some(genmcp::http::CompatConfig::default());
    let srv = genmcp::http::ServerThread::spawn(suite, config).expect("starts");

    // A call whose `_meta` carries the client's trace context.
    let mut meta = common::meta();
    meta["traceparent"] = json!(format!("00-{TRACE_ID}-{PARENT_ID}-01"));
    meta["tracestate"] = json!("vendor=abc");
    let mut h = headers("tools/call", Some("echo"));
    h.push(("Authorization".into(), format!("Bearer {TOKEN}")));
    let resp = post(
        srv.addr,
        &h,
        &request(
            json!("otel-1"),
            "tools/call",
            json!({"name": "echo", "arguments": {"password": SECRET}, "_meta": meta}),
        ),
    );
    assert_eq!(resp.status, 200);
    assert!(String::from_utf8_lossy(&resp.body).contains(SECRET));

    // No trace context in `_meta`: the HTTP `traceparent` header is the parent.
    let mut h = headers("tools/call", Some("echo"));
    h.push((
        "traceparent".into(),
        format!("00-{HEADER_TRACE_ID}-{HEADER_PARENT_ID}-01"),
    ));
    let resp = post(
        srv.addr,
        &h,
        &request(
            json!(2),
            "tools/call",
            json!({"name": "echo", "arguments": {"password": SECRET}}),
        ),
    );
    assert_eq!(resp.status, 200);

    // Two `traceparent` headers: none is the parent (W3C Trace Context), a
    // new trace starts; several `tracestate` headers are one list.
    for (id, extra) in [
        (
            "two-parents",
            [
                (
                    "traceparent",
                    format!("00-{HEADER_TRACE_ID}-{HEADER_PARENT_ID}-01"),
                ),
                (
                    "traceparent",
                    format!("00-{LISTEN_TRACE_ID}-{PARENT_ID}-01"),
                ),
            ],
        ),
        (
            "two-states",
            [
                ("tracestate", "a=1,b=2".to_owned()),
                ("tracestate", "c=3".to_owned()),
            ],
        ),
    ] {
        let mut h = headers("tools/call", Some("echo"));
        if id == "two-states" {
            h.push((
                "traceparent".into(),
                format!("00-{HEADER_TRACE_ID}-{HEADER_PARENT_ID}-01"),
            ));
        }
        h.extend(extra.into_iter().map(|(k, v)| (k.to_owned(), v)));
        let resp = post(
            srv.addr,
            &h,
            &request(
                json!(id),
                "tools/call",
                json!({"name": "echo", "arguments": {}}),
            ),
        );
        assert_eq!(resp.status, 200);
    }

    // A listen stream, parented the same way, for its whole life.
    let mut listen_meta = common::meta();
    listen_meta["traceparent"] = json!(format!("00-{LISTEN_TRACE_ID}-{PARENT_ID}-01"));
    let mut stream = common::Exchange::open(
        srv.addr,
        &headers("subscriptions/listen", None),
        request(
            json!("otel-listen"),
            "subscriptions/listen",
            json!({"notifications": {"toolsListChanged": true}, "_meta": listen_meta}),
        )
        .to_string()
        .as_bytes(),
    );
    stream.next_message().expect("ack");

    // A listen with no trace context in `_meta`: the HTTP header's.
    let mut h = headers("subscriptions/listen", None);
    h.push((
        "traceparent".into(),
        format!("00-{LISTEN_HEADER_TRACE_ID}-{HEADER_PARENT_ID}-01"),
    ));
    let mut by_header_stream = common::Exchange::open(
        srv.addr,
        &h,
        request(
            json!("otel-listen-header"),
            "subscriptions/listen",
            json!({"notifications": {"toolsListChanged": true}}),
        )
        .to_string()
        .as_bytes(),
    );
    by_header_stream.next_message().expect("ack");

    // A 2025-era session's call, its `_meta` carrying the trace context.
    let session = common::legacy::initialize(srv.addr);
    let resp = common::legacy::request(
        srv.addr,
        &session,
        json!("otel-legacy"),
        "tools/call",
        json!({"name": "echo", "arguments": {"password": SECRET},
               "_meta": {"traceparent": format!("00-{LEGACY_TRACE_ID}-{PARENT_ID}-01")}}),
    );
    assert_eq!(resp.status, 200);

    srv.stop();
    stream.next_message().expect("completion");
    by_header_stream.next_message().expect("completion");

    let mut found = Vec::new();
    let complete = common::wait_until(Duration::from_secs(20), || {
        otel.flush();
        found = spans(received);
        let names: Vec<&str> = found.iter().map(|s| s.name.as_str()).collect();
        names.iter().filter(|n| **n == "tools/call echo").count() >= 5
            // This test's listen (the other test of this file exports to
            // the same receiver).
            && found
                .iter()
                .any(|s| attr(&s.attributes, "jsonrpc.request.id").as_deref() == Some("otel-listen"))
            && found.iter().any(|s| {
                attr(&s.attributes, "jsonrpc.request.id").as_deref() == Some("otel-listen-header")
            })
            && received
                .lock()
                .unwrap()
                .iter()
                .any(|(p, _)| p == "/v1/metrics")
    });
    assert!(complete, "spans received: {found:#?}");

    // The span of the request with this JSON-RPC id.
    let span_of = |id: &str| {
        found
            .iter()
            .find(|s| attr(&s.attributes, "jsonrpc.request.id").as_deref() == Some(id))
            .unwrap_or_else(|| panic!("the span of {id}"))
    };
    let call = span_of("otel-1");
    assert_eq!(call.name, "tools/call echo");
    assert_eq!(
        hex(&call.trace_id),
        TRACE_ID,
        "the client's trace continues"
    );
    assert_eq!(
        hex(&call.parent_span_id),
        PARENT_ID,
        "the client's span is the parent"
    );
    assert_eq!(call.trace_state, "vendor=abc");
    assert_eq!(call.kind, 2, "SPAN_KIND_SERVER");
    for (key, value) in [
        ("mcp.method.name", "tools/call"),
        ("gen_ai.tool.name", "echo"),
        ("gen_ai.operation.name", "execute_tool"),
        ("mcp.protocol.version", "2026-07-28"),
        ("network.transport", "tcp"),
    ] {
        assert_eq!(
            attr(&call.attributes, key).as_deref(),
            Some(value),
            "{key} in {:?}",
            call.attributes
        );
    }
    assert_eq!(attr(&call.attributes, "error.type"), None);

    let by_header = span_of("2");
    assert_eq!(hex(&by_header.trace_id), HEADER_TRACE_ID);
    assert_eq!(hex(&by_header.parent_span_id), HEADER_PARENT_ID);

    let two_parents = span_of("two-parents");
    assert!(
        two_parents.parent_span_id.is_empty(),
        "two traceparent headers: a root span, not {:?}",
        hex(&two_parents.parent_span_id)
    );
    assert!(![HEADER_TRACE_ID, LISTEN_TRACE_ID].contains(&hex(&two_parents.trace_id).as_str()));
    let two_states = span_of("two-states");
    assert_eq!(hex(&two_states.parent_span_id), HEADER_PARENT_ID);
    assert_eq!(two_states.trace_state, "a=1,b=2,c=3");

    let listen = found
        .iter()
        .find(|s| {
            s.name == "subscriptions/listen"
                && attr(&s.attributes, "jsonrpc.request.id").as_deref() == Some("otel-listen")
        })
        .expect("the stream's span");
    assert_eq!(hex(&listen.trace_id), LISTEN_TRACE_ID);
    assert_eq!(hex(&listen.parent_span_id), PARENT_ID);
    let listen_by_header = span_of("otel-listen-header");
    assert_eq!(listen_by_header.name, "subscriptions/listen");
    assert_eq!(hex(&listen_by_header.trace_id), LISTEN_HEADER_TRACE_ID);
    assert_eq!(hex(&listen_by_header.parent_span_id), HEADER_PARENT_ID);

    let legacy = span_of("otel-legacy");
    assert_eq!(legacy.name, "tools/call echo");
    assert_eq!(hex(&legacy.trace_id), LEGACY_TRACE_ID);
    assert_eq!(hex(&legacy.parent_span_id), PARENT_ID);
    for (span, key, value) in [
        (legacy, "mcp.protocol.version", common::legacy::LEGACY),
        (listen, "genmcp.stream.filter", "toolsListChanged"),
        (listen, "genmcp.stream.close_reason", "shutdown"),
        (listen, "genmcp.stream.frames", "2"),
        (listen, "genmcp.stream.subscription_id", "\"otel-listen\""),
        (call, "genmcp.request.outcome", "ok"),
    ] {
        assert_eq!(
            attr(&span.attributes, key).as_deref(),
            Some(value),
            "{key} of {:?}",
            span.name
        );
    }
    // Every attribute is a convention's, or genmcp's own under `genmcp.`,
    // and no log line rides along (its fields are no convention's and may
    // carry error texts).
    for span in &found {
        assert!(
            span.events.is_empty(),
            "{:?} exported events: {:?}",
            span.name,
            span.events
        );
        for kv in &span.attributes {
            assert!(
                CONVENTION_NAMESPACES
                    .iter()
                    .any(|ns| kv.key.starts_with(ns)),
                "{:?} of {:?} is neither a convention's nor under genmcp.",
                kv.key,
                span.name
            );
        }
    }

    // Each process names itself: a fleet's series do not merge in a collector.
    let instance_ids: Vec<String> = received
        .lock()
        .unwrap()
        .iter()
        .filter(|(p, _)| p == "/v1/metrics")
        .filter_map(|(_, b)| ExportMetricsServiceRequest::decode(b.as_slice()).ok())
        .flat_map(|r| r.resource_metrics)
        .filter_map(|r| r.resource)
        .filter_map(|r| attr(&r.attributes, "service.instance.id"))
        .collect();
    assert!(!instance_ids.is_empty(), "no service.instance.id");
    assert!(
        instance_ids
            .iter()
            .all(|id| id.len() == 32 && id == &instance_ids[0])
    );

    // The duration histogram, with the conventions' attributes.
    let metrics: Vec<_> = received
        .lock()
        .unwrap()
        .iter()
        .filter(|(p, _)| p == "/v1/metrics")
        .filter_map(|(_, b)| ExportMetricsServiceRequest::decode(b.as_slice()).ok())
        .flat_map(|r| r.resource_metrics)
        .flat_map(|r| r.scope_metrics)
        .flat_map(|s| s.metrics)
        .collect();
    // The latest export (the others' of this file share the exporter and
    // flush it too: an earlier one may predate this test's calls).
    let duration = metrics
        .iter()
        .rev()
        .find(|m| m.name == "mcp.server.operation.duration")
        .unwrap_or_else(|| panic!("no duration metric in {metrics:#?}"));
    assert_eq!(duration.unit, "s");
    let Some(metric::Data::Histogram(h)) = &duration.data else {
        panic!("not a histogram: {duration:?}");
    };
    let point = h
        .data_points
        .iter()
        .find(|p| {
            attr(&p.attributes, "gen_ai.tool.name").as_deref() == Some("echo")
                && attr(&p.attributes, "mcp.protocol.version").as_deref() == Some("2026-07-28")
        })
        .expect("a data point for echo");
    assert_eq!(point.count, 4, "the four 2026 echo calls");
    assert_eq!(
        attr(&point.attributes, "mcp.method.name").as_deref(),
        Some("tools/call")
    );
    assert_eq!(
        attr(&point.attributes, "network.transport").as_deref(),
        Some("tcp")
    );
    assert_eq!(
        attr(&point.attributes, "mcp.protocol.version").as_deref(),
        Some("2026-07-28")
    );
    // The stream's life, its kind under genmcp's own attribute.
    let kinds: Vec<String> = metrics
        .iter()
        .filter(|m| m.name == "mcp.server.session.duration")
        .filter_map(|m| match &m.data {
            Some(metric::Data::Histogram(h)) => Some(&h.data_points),
            _ => None,
        })
        .flatten()
        .filter_map(|p| attr(&p.attributes, "genmcp.session.kind"))
        .collect();
    assert!(kinds.iter().any(|k| k == "listen"), "{kinds:?}");

    // Nothing sensitive left the process: no argument, result or token in
    // any exported byte.
    for (path, body) in received.lock().unwrap().iter() {
        let body = String::from_utf8_lossy(body);
        assert!(!body.contains(SECRET), "an argument or result in {path}");
        assert!(!body.contains(TOKEN), "a token in {path}");
    }
}

/// The namespaces of the attributes the conventions name, and genmcp's own.
const CONVENTION_NAMESPACES: [&str; 7] = [
    "mcp.", "gen_ai.", "jsonrpc.", "rpc.", "error.", "network.", "genmcp.",
];

const GET_TRACE_ID: &str = "5555aaaa5555aaaa5555aaaa5555aaaa";
const GET_PARENT_ID: &str = "1234567890abcdef";

#[test]
fn a_2025_get_stream_is_parented_on_the_traceparent_header_of_its_get() {
    let (otel, received) = exporter();
    let mut config = common::config();
    config.compat = Some(genmcp::http::CompatConfig::default());
    let srv = genmcp::http::ServerThread::spawn(suite, config).expect("starts");
    let session = common::legacy::initialize(srv.addr);
    // A GET has no `_meta`: its headers carry the client's trace context.
    let h = vec![
        ("Accept".to_owned(), "text/event-stream".to_owned()),
        (
            "MCP-Protocol-Version".to_owned(),
            common::legacy::LEGACY.to_owned(),
        ),
        ("Mcp-Session-Id".to_owned(), session.clone()),
        (
            "traceparent".to_owned(),
            format!("00-{GET_TRACE_ID}-{GET_PARENT_ID}-01"),
        ),
        ("tracestate".to_owned(), "vendor=get".to_owned()),
    ];
    let mut get = common::Exchange::open_with(srv.addr, "GET", &h, b"");
    assert_eq!(get.status, 200);
    // The DELETE ends the stream, and so its span.
    assert_eq!(common::legacy::delete(srv.addr, &session).status, 200);
    let _ = get.read_to_end();
    srv.stop();

    let mut found = Vec::new();
    let complete = common::wait_until(Duration::from_secs(20), || {
        otel.flush();
        found = spans(received);
        found
            .iter()
            .any(|s| s.name == "session stream" && hex(&s.trace_id) == GET_TRACE_ID)
    });
    assert!(
        complete,
        "no session stream span in the GET's trace: {found:#?}"
    );
    let stream = found
        .iter()
        .find(|s| s.name == "session stream" && hex(&s.trace_id) == GET_TRACE_ID)
        .expect("the GET stream's span");
    assert_eq!(
        hex(&stream.parent_span_id),
        GET_PARENT_ID,
        "the GET's span is the parent"
    );
    assert_eq!(stream.trace_state, "vendor=get");
    assert_eq!(
        attr(&stream.attributes, "mcp.protocol.version").as_deref(),
        Some(common::legacy::LEGACY)
    );
    assert_eq!(
        attr(&stream.attributes, "genmcp.stream.close_reason").as_deref(),
        Some("disconnected")
    );
    // No JSON-RPC request opened it: no method, genmcp's or the conventions'.
    for key in ["genmcp.method", "mcp.method.name", "jsonrpc.request.id"] {
        assert_eq!(attr(&stream.attributes, key), None, "{key}");
    }
}

/// A tool that runs as a task and waits for input until cancelled.
fn task_suite() -> Suite {
    let catalog = Catalog::new();
    catalog.add_tool(
        ToolBuilder::new("waits")
            .description("a task waiting for an answer")
            .task_support(TaskSupport::Required)
            .handler(|call| async move {
                if let Some(task) = call.task() {
                    let _ = task.elicit("word?", json!({"type": "object"})).await;
                }
                Ok(CallToolResult::text("done").into())
            }),
    );
    Suite::builder(Implementation::new("otel-tasks", "1"))
        .catalog(catalog)
        .build()
}

#[test]
fn a_task_links_to_the_call_that_created_it_and_a_listen_following_it_links_to_the_task() {
    let (otel, received) = exporter();
    let srv = genmcp::http::ServerThread::spawn(task_suite, common::tasks::bearer_config())
        .expect("starts");
    let id = common::tasks::start_task(srv.addr, "ada", "waits");
    let body = request(
        json!("otel-task-listen"),
        "subscriptions/listen",
        json!({"notifications": {"taskIds": [id]}, "_meta": common::tasks::meta(true)}),
    );
    let h = common::tasks::as_principal(headers("subscriptions/listen", None), "ada");
    let mut stream = common::Exchange::open(srv.addr, &h, body.to_string().as_bytes());
    stream.next_message().expect("ack");
    let cancelled =
        common::tasks::call_as(srv.addr, "ada", "tasks/cancel", &id, json!({"taskId": id}));
    assert!(cancelled["result"].is_object(), "{cancelled}");
    srv.stop();

    let mut found = Vec::new();
    let complete = common::wait_until(Duration::from_secs(20), || {
        otel.flush();
        found = spans(received);
        found.iter().any(|s| s.name == "task")
            && found.iter().any(|s| {
                attr(&s.attributes, "jsonrpc.request.id").as_deref() == Some("otel-task-listen")
            })
    });
    assert!(complete, "spans received: {found:#?}");
    let call = found
        .iter()
        .find(|s| s.name == "tools/call waits")
        .expect("the call's span");
    let task = found
        .iter()
        .find(|s| s.name == "task" && s.links.iter().any(|l| l.span_id == call.span_id))
        .unwrap_or_else(|| panic!("no task span linked to the call in {found:#?}"));
    assert_ne!(
        task.trace_id, call.trace_id,
        "the task is a trace of its own"
    );
    let listen = found
        .iter()
        .find(|s| attr(&s.attributes, "jsonrpc.request.id").as_deref() == Some("otel-task-listen"))
        .expect("the listen's span");
    assert!(
        listen
            .links
            .iter()
            .any(|l| l.span_id == task.span_id && l.trace_id == task.trace_id),
        "the listen links to the task it follows: {:?}",
        listen.links
    );
    assert_eq!(
        attr(&listen.attributes, "genmcp.stream.filter").as_deref(),
        Some("taskIds:1")
    );
}

const REFUSED_TRACE_ID: &str = "99998888777766665555444433332222";

#[test]
fn a_refused_request_is_exported_with_its_error_and_the_clients_trace() {
    let (otel, received) = exporter();
    let srv = genmcp::http::ServerThread::spawn(suite, common::config()).expect("starts");
    // A required header missing (-32020): refused before any handler ran,
    // still a child of the client's span.
    let mut meta = common::meta();
    meta["traceparent"] = json!(format!("00-{REFUSED_TRACE_ID}-{PARENT_ID}-01"));
    let mut h = headers("tools/list", None);
    h.retain(|(k, _)| k != "Mcp-Method");
    let resp = post(
        srv.addr,
        &h,
        &request(json!("otel-refused"), "tools/list", json!({"_meta": meta})),
    );
    assert_eq!(resp.status, 400);
    srv.stop();

    let mut found = Vec::new();
    let complete = common::wait_until(Duration::from_secs(20), || {
        otel.flush();
        found = spans(received);
        found
            .iter()
            .any(|s| attr(&s.attributes, "jsonrpc.request.id").as_deref() == Some("otel-refused"))
            && !refused_points(received).is_empty()
    });
    assert!(complete, "spans received: {found:#?}");
    let span = found
        .iter()
        .find(|s| attr(&s.attributes, "jsonrpc.request.id").as_deref() == Some("otel-refused"))
        .expect("the refused request's span");
    assert_eq!(span.name, "tools/list");
    assert_eq!(hex(&span.trace_id), REFUSED_TRACE_ID);
    assert_eq!(hex(&span.parent_span_id), PARENT_ID);
    assert_eq!(span.kind, 2, "SPAN_KIND_SERVER");
    for (key, value) in [
        ("mcp.method.name", "tools/list"),
        ("error.type", "-32020"),
        ("rpc.response.status_code", "-32020"),
        ("mcp.protocol.version", "2026-07-28"),
        ("network.transport", "tcp"),
    ] {
        assert_eq!(
            attr(&span.attributes, key).as_deref(),
            Some(value),
            "{key} in {:?}",
            span.attributes
        );
    }
    assert_eq!(
        span.status.as_ref().map(|s| s.code),
        Some(2),
        "STATUS_CODE_ERROR"
    );
    // Its duration: a data point with the same attributes.
    let points = refused_points(received);
    let point = points.first().expect("a -32020 data point");
    for (key, value) in [
        ("mcp.method.name", "tools/list"),
        ("network.transport", "tcp"),
        ("mcp.protocol.version", "2026-07-28"),
    ] {
        assert_eq!(
            attr(&point.attributes, key).as_deref(),
            Some(value),
            "{key}"
        );
    }
    assert!(point.count >= 1);
}

/// The `mcp.server.operation.duration` data points received with
/// `error.type = -32020`.
fn refused_points(
    received: &Received,
) -> Vec<opentelemetry_proto::tonic::metrics::v1::HistogramDataPoint> {
    received
        .lock()
        .unwrap()
        .iter()
        .filter(|(p, _)| p == "/v1/metrics")
        .filter_map(|(_, b)| ExportMetricsServiceRequest::decode(b.as_slice()).ok())
        .flat_map(|r| r.resource_metrics)
        .flat_map(|r| r.scope_metrics)
        .flat_map(|s| s.metrics)
        .filter(|m| m.name == "mcp.server.operation.duration")
        .filter_map(|m| match m.data {
            Some(metric::Data::Histogram(h)) => Some(h.data_points),
            _ => None,
        })
        .flatten()
        .filter(|p| attr(&p.attributes, "error.type").as_deref() == Some("-32020"))
        .collect()
}

#[test]
fn the_authenticated_principal_is_not_exported_by_default() {
    const SUBJECT: &str = "subject-never-exported";
    let (otel, received) = exporter();
    let mut config = common::config();
    config.auth = Some(genmcp::http::auth::AuthConfig::new(
        genmcp::http::auth::TokenTable::parse(&format!("tok-principal {SUBJECT}\n")).unwrap(),
    ));
    let srv = genmcp::http::ServerThread::spawn(suite, config).expect("starts");
    // Not `echo`: the first test counts its calls.
    let mut h = headers("tools/list", None);
    h.push(("Authorization".into(), "Bearer tok-principal".into()));
    let resp = post(
        srv.addr,
        &h,
        &request(json!("otel-principal"), "tools/list", json!({})),
    );
    assert_eq!(resp.status, 200);
    srv.stop();
    let mut found = Vec::new();
    let complete = common::wait_until(Duration::from_secs(20), || {
        otel.flush();
        found = spans(received);
        found
            .iter()
            .any(|s| attr(&s.attributes, "jsonrpc.request.id").as_deref() == Some("otel-principal"))
    });
    assert!(complete, "spans received: {found:#?}");
    let span = found
        .iter()
        .find(|s| attr(&s.attributes, "jsonrpc.request.id").as_deref() == Some("otel-principal"))
        .expect("the call's span");
    assert_eq!(attr(&span.attributes, "principal"), None, "{span:?}");
    assert_eq!(attr(&span.attributes, "genmcp.principal"), None, "{span:?}");
    for (path, body) in received.lock().unwrap().iter() {
        assert!(
            !String::from_utf8_lossy(body).contains(SUBJECT),
            "the principal in {path}"
        );
    }
}

/// A tool result that fails its output schema is logged with the failing
/// value; that log line never rides along with the exported span (its fields
/// are no convention's, and carry the tool's data).
#[test]
fn log_lines_inside_a_request_span_are_not_exported() {
    const VALUE: &str = "result-value-never-exported";
    let (otel, received) = exporter();
    let srv = genmcp::http::ServerThread::spawn(
        || {
            let suite = suite();
            suite.catalog().add_tool(
                ToolBuilder::new("mismatch")
                    .description("answers structured content its schema refuses")
                    .output_schema(json!({
                        "type": "object",
                        "properties": {"n": {"type": "integer"}},
                        "required": ["n"]
                    }))
                    .handler(|_| async {
                        Ok(CallToolResult::text("x")
                            .with_structured(json!({"n": VALUE}))
                            .into())
                    }),
            );
            suite
        },
        common::config(),
    )
    .expect("starts");
    let resp = post(
        srv.addr,
        &headers("tools/call", Some("mismatch")),
        &request(
            json!("otel-mismatch"),
            "tools/call",
            json!({"name": "mismatch", "arguments": {}}),
        ),
    );
    assert_eq!(resp.status, 200);
    srv.stop();
    let mut found = Vec::new();
    let complete = common::wait_until(Duration::from_secs(20), || {
        otel.flush();
        found = spans(received);
        found
            .iter()
            .any(|s| attr(&s.attributes, "jsonrpc.request.id").as_deref() == Some("otel-mismatch"))
    });
    assert!(complete, "spans received: {found:#?}");
    for (path, body) in received.lock().unwrap().iter() {
        assert!(
            !String::from_utf8_lossy(body).contains(VALUE),
            "the tool's value in {path}"
        );
    }
}
