//! Property tests (seeded, bounded) for the W3C trace-context parsing a
//! client's `_meta.traceparent` / `tracestate` (and HTTP headers) go
//! through: no panic on any input, a valid `traceparent` round-trips, and a
//! kept `tracestate` stays within the W3C bounds.
//!
//! More cases: `PROPTEST_CASES=100000 cargo test --release --test fuzz_trace_context`.

#[path = "common/fuzz.rs"]
mod fuzz;

use fuzz::runner;
use genmcp::protocol::trace_context::{
    MAX_TRACESTATE_LEN, MAX_TRACESTATE_MEMBERS, TraceContext, TraceParent, valid_tracestate,
};
use proptest::prelude::*;
use serde_json::{Map, Value};

/// This file's fuzz seed.
const SEED: u8 = 0x7c;

/// Strings near the `traceparent` shape: valid ones with one byte changed,
/// cut or extended, and arbitrary text.
fn traceparent_like() -> impl Strategy<Value = String> {
    let valid = (
        any::<[u8; 16]>(),
        any::<[u8; 8]>(),
        any::<u8>(),
        prop_oneof![Just(0u8), any::<u8>()],
    )
        .prop_map(|(t, p, f, v)| {
            format!(
                "{v:02x}-{}-{}-{f:02x}",
                t.iter().map(|b| format!("{b:02x}")).collect::<String>(),
                p.iter().map(|b| format!("{b:02x}")).collect::<String>()
            )
        });
    let mutated = (valid.clone(), any::<usize>(), any::<char>()).prop_map(|(s, at, c)| {
        let mut chars: Vec<char> = s.chars().collect();
        let i = at % chars.len();
        chars[i] = c;
        chars.into_iter().collect()
    });
    let cut = (valid.clone(), any::<usize>()).prop_map(|(s, n)| s[..n % s.len()].to_owned());
    let extended = (valid.clone(), ".{0,20}").prop_map(|(s, tail)| format!("{s}{tail}"));
    prop_oneof![valid, mutated, cut, extended, ".{0,80}"]
}

#[test]
fn traceparent_parsing_never_panics_and_round_trips() {
    runner(2_000, SEED)
        .run(&traceparent_like(), |s| {
            if let Some(p) = TraceParent::parse(&s) {
                let s = s.trim_matches(|c| c == ' ' || c == '\t');
                prop_assert!(p.trace_id != [0; 16] && p.parent_id != [0; 8]);
                // What parsed is what was sent, in the canonical form.
                let canonical = format!(
                    "{}-{}-{}-{:02x}",
                    &s[..2],
                    p.trace_id_hex(),
                    p.parent_id_hex(),
                    p.flags
                );
                prop_assert!(s.starts_with(&canonical), "{} vs {}", s, canonical);
                prop_assert_ne!(&s[..2], "ff");
            }
            Ok(())
        })
        .expect("traceparent property");
}

#[test]
fn a_kept_tracestate_is_bounded_and_meta_of_any_shape_is_safe() {
    let state = prop_oneof![
        "[a-z0-9_*/@-]{1,8}=[a-zA-Z0-9._!]{1,12}(,[a-z0-9]{1,4}=[a-z]{1,4}){0,40}",
        ".{0,600}",
    ];
    let meta = (traceparent_like(), state, any::<bool>());
    runner(2_000, SEED)
        .run(&meta, |(parent, state, as_number)| {
            if valid_tracestate(&state) {
                prop_assert!(state.len() <= MAX_TRACESTATE_LEN);
                prop_assert!(
                    state.split(',').filter(|m| !m.trim().is_empty()).count()
                        <= MAX_TRACESTATE_MEMBERS
                );
            }
            let mut m = Map::new();
            m.insert(
                "traceparent".into(),
                if as_number {
                    Value::from(7)
                } else {
                    Value::from(parent.clone())
                },
            );
            m.insert("tracestate".into(), Value::from(state.clone()));
            let cx = TraceContext::from_meta(&m);
            prop_assert_eq!(
                cx.is_some(),
                !as_number && TraceParent::parse(&parent).is_some()
            );
            if let Some(cx) = cx
                && let Some(kept) = cx.state
            {
                prop_assert!(kept.len() <= MAX_TRACESTATE_LEN);
            }
            Ok(())
        })
        .expect("tracestate property");
}
