//! Property tests (seeded, bounded) for what decodes client input: the JSON-RPC
//! decoder, `_meta` validation, the listen filter and template matching. Each
//! asserts no panic, a well-formed answer and bounded allocation (what is kept
//! is bounded by a function of the input size and the documented caps).
//!
//! More cases: `PROPTEST_CASES=100000 cargo test --release --test fuzz_decoders`
//! (see docs/security.md).

#[path = "common/fuzz.rs"]
mod fuzz;

use fuzz::runner;
use genmcp::protocol::jsonrpc::{MAX_ID_LEN, encode_error, parse_value};
use genmcp::protocol::meta::{
    MAX_CLIENT_CAPABILITIES_BYTES, MAX_EXTRA_META_BYTES, MAX_PROGRESS_TOKEN_LEN,
    MAX_TRACE_VALUE_LEN,
};
use genmcp::protocol::types::MAX_RESOURCE_URI_LEN;
use genmcp::protocol::{Incoming, RequestId, RequestMeta, SubscriptionFilter};
use genmcp::runtime::{Limits, listen_filter};
use genmcp::suite::ResourceTemplate;
use proptest::prelude::*;
use serde_json::{Map, Value, json};

/// This file's fuzz seed.
const SEED: u8 = 0x6d;

/// Arbitrary JSON, up to a few levels deep, with long strings now and then.
fn json_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        any::<f64>()
            .prop_filter("finite", |f| f.is_finite())
            .prop_map(Value::from),
        ".{0,12}".prop_map(Value::from),
        (0usize..1200).prop_map(|n| Value::from("é".repeat(n))),
    ];
    leaf.prop_recursive(4, 64, 8, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..8).prop_map(Value::Array),
            prop::collection::vec((".{0,10}", inner), 0..8)
                .prop_map(|kv| Value::Object(kv.into_iter().collect())),
        ]
    })
}

fn meta_keys() -> impl Strategy<Value = String> {
    prop_oneof![
        Just("io.modelcontextprotocol/protocolVersion".to_owned()),
        Just("io.modelcontextprotocol/clientCapabilities".to_owned()),
        Just("io.modelcontextprotocol/clientInfo".to_owned()),
        Just("io.modelcontextprotocol/logLevel".to_owned()),
        Just("progressToken".to_owned()),
        Just("traceparent".to_owned()),
        Just("baggage".to_owned()),
        ".{0,16}",
    ]
}

/// A `_meta` mixing valid required keys, known keys with arbitrary values and
/// unknown keys.
fn meta_object() -> impl Strategy<Value = Map<String, Value>> {
    (
        any::<bool>(),
        prop::collection::vec((meta_keys(), json_value()), 0..10),
    )
        .prop_map(|(valid, extra)| {
            let mut m = Map::new();
            if valid {
                m.insert(
                    "io.modelcontextprotocol/protocolVersion".into(),
                    json!("2026-07-28"),
                );
                m.insert(
                    "io.modelcontextprotocol/clientCapabilities".into(),
                    json!({}),
                );
            }
            for (k, v) in extra {
                m.insert(k, v);
            }
            m
        })
}

/// Mutations of a valid message: a good starting point for the decoder.
fn message_bytes() -> impl Strategy<Value = Vec<u8>> {
    let structured = || {
        (
            prop_oneof![
                json_value(),
                (0usize..600).prop_map(|n| json!("i".repeat(n)))
            ],
            ".{0,20}",
            meta_object(),
            json_value(),
        )
            .prop_map(|(id, method, meta, other)| {
                json!({"jsonrpc": "2.0", "id": id, "method": method,
                "params": {"_meta": meta, "other": other}})
                .to_string()
                .into_bytes()
            })
    };
    let mutated = (
        structured(),
        prop::collection::vec((any::<usize>(), any::<u8>()), 0..6),
    )
        .prop_map(|(mut bytes, edits)| {
            for (at, b) in edits {
                if !bytes.is_empty() {
                    let i = at % bytes.len();
                    bytes[i] = b;
                }
            }
            bytes
        });
    prop_oneof![
        structured(),
        mutated,
        prop::collection::vec(any::<u8>(), 0..256),
    ]
}

#[test]
fn fuzz_the_json_rpc_decoder() {
    runner(1_000, SEED)
        .run(&message_bytes(), |bytes| {
            match Incoming::parse(&bytes) {
                Ok(Incoming::Request(r)) => {
                    if let RequestId::String(s) = &r.id {
                        prop_assert!(s.len() <= MAX_ID_LEN);
                    }
                    // What is kept is never larger than what was sent (plus
                    // the re-encoding of numbers).
                    let kept = serde_json::to_vec(&r.params).unwrap_or_default().len();
                    prop_assert!(kept <= 2 * bytes.len() + 64, "{kept} > {}", bytes.len());
                    if let Some(meta) = r.params.as_ref().and_then(|p| p.get("_meta")) {
                        let size = serde_json::to_vec(meta).unwrap_or_default().len();
                        prop_assert!(size <= bytes.len() + 64);
                    }
                }
                Ok(Incoming::Notification(_)) => {}
                Err(e) => {
                    let code = e.error.code();
                    prop_assert!(code == -32700 || code == -32600, "{code}");
                    // The error reply is well-formed and small.
                    let reply = encode_error(e.id.as_ref(), &e.error);
                    let v: Value = serde_json::from_slice(&reply).expect("reply is JSON");
                    prop_assert_eq!(&v["jsonrpc"], "2.0");
                    prop_assert!(reply.len() <= 2 * MAX_ID_LEN + 1024, "{}", reply.len());
                }
            }
            Ok(())
        })
        .unwrap();
}

/// Below the `_meta` budget nothing can be skipped, so the one-pass decoder
/// must read exactly what `serde_json` reads: the same value, or an error
/// where `serde_json` errs, and the same message as validating that value
/// (`Incoming::from_value`). Above it, what is kept is a subset of the message.
#[test]
fn the_decoder_reads_what_serde_json_reads() {
    runner(1_000, SEED)
        .run(&message_bytes(), |bytes| {
            let expected = serde_json::from_slice::<Value>(&bytes);
            match (&expected, Incoming::parse(&bytes)) {
                (Ok(value), parsed) if bytes.len() <= MAX_EXTRA_META_BYTES => {
                    prop_assert_eq!(parsed, Incoming::from_value(value.clone()));
                }
                (Ok(_), _) => {}
                (Err(_), parsed) => {
                    prop_assert_eq!(parsed.map_err(|e| e.error.code()), Err(-32700));
                }
            }
            match parse_value(&bytes) {
                Ok(got) => {
                    // A kept `_meta` value is parsed again on its own, with a
                    // fresh nesting limit: the one leniency allowed.
                    let expected = match expected {
                        Ok(v) => v,
                        Err(e) => {
                            prop_assert!(e.to_string().contains("recursion limit"), "{e}");
                            return Ok(());
                        }
                    };
                    if bytes.len() <= MAX_EXTRA_META_BYTES {
                        prop_assert_eq!(got, expected);
                    } else {
                        let kept = got.pointer("/params/_meta").and_then(Value::as_object);
                        for (k, v) in kept.into_iter().flatten() {
                            prop_assert_eq!(
                                Some(v),
                                expected.pointer(&format!(
                                    "/params/_meta/{}",
                                    k.replace('~', "~0").replace('/', "~1")
                                ))
                            );
                        }
                    }
                }
                Err(_) => prop_assert!(expected.is_err()),
            }
            Ok(())
        })
        .unwrap();
}

#[test]
fn fuzz_meta_validation() {
    runner(1_000, SEED)
        .run(&meta_object(), |meta| {
            let mut params = Map::new();
            params.insert("_meta".into(), Value::Object(meta));
            match RequestMeta::from_params(Some(&params)) {
                Ok(m) => {
                    let extra = serde_json::to_vec(&m.extra).unwrap_or_default().len();
                    prop_assert!(
                        extra <= MAX_EXTRA_META_BYTES + 3 * (MAX_TRACE_VALUE_LEN + 32) + 2,
                        "{extra}"
                    );
                    let caps = serde_json::to_vec(&m.client_capabilities).unwrap_or_default();
                    prop_assert!(caps.len() <= MAX_CLIENT_CAPABILITIES_BYTES);
                    if let Some(genmcp::protocol::ProgressToken::String(t)) = &m.progress_token {
                        prop_assert!(t.len() <= MAX_PROGRESS_TOKEN_LEN);
                    }
                    if let Some(info) = &m.client_info {
                        let size = serde_json::to_vec(&info.extra).unwrap_or_default().len();
                        prop_assert!(size <= MAX_EXTRA_META_BYTES + 2);
                    }
                    let _ = m.check_version();
                }
                Err(e) => prop_assert_eq!(e.code(), -32602),
            }
            Ok(())
        })
        .unwrap();
}

fn uri() -> impl Strategy<Value = Value> {
    prop_oneof![
        "[a-z]{1,4}://[a-zé/?#.%0-9]{0,24}".prop_map(Value::from),
        (0usize..3000).prop_map(|n| Value::from(format!("res://{}", "u".repeat(n)))),
        json_value(),
    ]
}

#[test]
fn fuzz_the_listen_filter() {
    let notifications = (
        prop::collection::vec(
            (
                prop_oneof![
                    Just("toolsListChanged".to_owned()),
                    Just("promptsListChanged".to_owned()),
                    Just("resourcesListChanged".to_owned()),
                    Just("taskIds".to_owned()),
                    ".{0,12}",
                ],
                prop_oneof![any::<bool>().prop_map(Value::from), json_value()],
            ),
            0..4,
        ),
        prop::option::of(prop::collection::vec(uri(), 0..40)),
        0usize..40,
    );
    runner(1_000, SEED)
        .run(&notifications, |(flags, uris, max)| {
            let mut n: Map<String, Value> = flags.into_iter().collect();
            if let Some(uris) = uris {
                n.insert("resourceSubscriptions".into(), Value::Array(uris));
            }
            let mut params = Map::new();
            params.insert("notifications".into(), Value::Object(n));
            let mut limits = Limits::default();
            limits.max_resource_uris = max;
            let meta = RequestMeta::current();
            match listen_filter(&params, &meta, &limits) {
                Ok(f) => {
                    prop_assert!(f.resource_subscriptions.len() <= max);
                    let unique: std::collections::HashSet<&String> =
                        f.resource_subscriptions.iter().collect();
                    prop_assert_eq!(unique.len(), f.resource_subscriptions.len());
                    prop_assert!(
                        f.resource_subscriptions
                            .iter()
                            .all(|u| u.len() <= MAX_RESOURCE_URI_LEN)
                    );
                    // Clamping never widens.
                    let other = SubscriptionFilter {
                        tools_list_changed: true,
                        resource_subscriptions: f
                            .resource_subscriptions
                            .iter()
                            .step_by(2)
                            .cloned()
                            .collect(),
                        ..Default::default()
                    };
                    let both = f.intersect(&other);
                    prop_assert!(
                        both.resource_subscriptions.len() <= other.resource_subscriptions.len()
                    );
                    prop_assert!(!both.prompts_list_changed || f.prompts_list_changed);
                }
                Err(e) => prop_assert!(e.code() == -32602 || e.code() == -32021, "{}", e.code()),
            }
            Ok(())
        })
        .unwrap();
}

#[test]
fn fuzz_template_matching() {
    let template = prop_oneof![
        Just("x://{+p}.txt".to_owned()),
        Just("x://{+p}€{q}".to_owned()),
        Just("file:///{+dir}/{name}.txt".to_owned()),
        Just("db://{table}/{row}".to_owned()),
        "[a-z:/{}+.é€?#]{0,20}",
    ];
    let uri = prop_oneof!["[a-z:/{}+.é€?#%0-9A-F]{0,40}", ".{0,40}",];
    runner(1_000, SEED)
        .run(&(template, uri), |(template, uri)| {
            let t = ResourceTemplate::new(template, "t");
            if let Some(vars) = t.matches(&uri) {
                for (name, value) in &vars {
                    prop_assert!(t.variables().contains(&name.as_str()));
                    prop_assert!(value.as_str().is_some_and(|v| !v.is_empty()));
                    prop_assert!(value.as_str().is_some_and(|v| v.len() <= uri.len()));
                }
            }
            Ok(())
        })
        .unwrap();
}
