//! Resource templates never match a variable whose `%`-escapes do not decode
//! to valid UTF-8, on the 2026-07-28 path and the 2025 path alike, and a
//! property test over generated URIs: every match's `{var}` values are the
//! decoded text, without `/`.

mod common;

#[path = "common/fuzz.rs"]
mod fuzz;

use common::{Response, call, legacy};
use genmcp::http::ServerThread;
use genmcp::suite::ResourceTemplate;
use proptest::prelude::*;
use serde_json::{Value, json};

const TRAVERSAL: &str = "test://template/..%2F..%2Fetc%FF/data";

/// The JSON-RPC reply of a response, JSON or SSE.
fn reply(resp: &Response) -> Value {
    if resp
        .header("content-type")
        .is_some_and(|t| t.starts_with("text/event-stream"))
    {
        resp.sse_messages().pop().expect("one message")
    } else {
        resp.json()
    }
}

/// "Resource not found" with `code` (`-32602` at 2026-07-28, `-32002` on the
/// 2025 path).
fn assert_not_found(body: &Value, uri: &str, code: i64) {
    assert_eq!(body["error"]["code"], code, "{body}");
    assert_eq!(body["error"]["message"], "Resource not found", "{body}");
    assert_eq!(body["error"]["data"], json!({ "uri": uri }));
    assert!(body.get("result").is_none(), "{body}");
}

#[test]
fn an_escape_that_is_not_utf8_matches_no_template_on_either_path() {
    let srv = ServerThread::spawn(genmcp_cli::fixtures::suite, common::probe::config())
        .expect("server starts");
    // 2026-07-28.
    let r = call(
        srv.addr,
        json!(1),
        "resources/read",
        json!({"uri": TRAVERSAL}),
    );
    assert_eq!(r.status, 200);
    assert_not_found(&reply(&r), TRAVERSAL, -32602);
    // The same template still matches valid escapes.
    let ok = call(
        srv.addr,
        json!(2),
        "resources/read",
        json!({"uri": "test://template/%C3%A9/data"}),
    );
    assert!(
        reply(&ok)["result"]["contents"].is_array(),
        "{}",
        reply(&ok)
    );
    // 2025-11-25, in a session.
    let session = legacy::initialize(srv.addr);
    let r = legacy::request(
        srv.addr,
        &session,
        json!(3),
        "resources/read",
        json!({"uri": TRAVERSAL}),
    );
    assert_eq!(r.status, 200);
    assert_not_found(&reply(&r), TRAVERSAL, -32002);
}

/// Every byte percent-encoded.
fn encode(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("%{b:02X}")).collect()
}

/// For any bytes `v`, `test://template/<v, encoded>/data` matches exactly when
/// `v` is non-empty, valid UTF-8 and free of `/`, and then the variable is `v`.
#[test]
fn an_encoded_value_matches_exactly_when_it_decodes_to_text_without_a_slash() {
    let t = ResourceTemplate::new("test://template/{id}/data", "d");
    let values = prop::collection::vec(
        prop_oneof![
            Just(b'/'),
            Just(0xFFu8),
            Just(0xC3u8),
            Just(0xA9u8),
            any::<u8>()
        ],
        0..12,
    );
    fuzz::runner(2_000, 41)
        .run(&values, |v| {
            let uri = format!("test://template/{}/data", encode(&v));
            let expected = match std::str::from_utf8(&v) {
                Ok(text) if !text.is_empty() && !text.contains('/') => Some(text.to_owned()),
                _ => None,
            };
            let got = t
                .matches(&uri)
                .map(|vars| vars["id"].as_str().unwrap_or_default().to_owned());
            prop_assert_eq!(got, expected, "{}", uri);
            Ok(())
        })
        .unwrap();
}

/// The reference: percent-decodes `%hh` (two hex digits), leaving any other
/// `%` as is.
fn decode(raw: &str) -> Vec<u8> {
    let b = raw.as_bytes();
    let (mut out, mut i) = (Vec::new(), 0);
    while i < b.len() {
        let hex = |j: usize| b.get(j).and_then(|c| (*c as char).to_digit(16));
        if let (b'%', Some(h), Some(l)) = (b[i], hex(i + 1), hex(i + 2)) {
            out.push((h * 16 + l) as u8);
            i += 3;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    out
}

/// The text pieces the generated URIs are made of: escapes (valid, `/`, not
/// UTF-8, half a character), stray `%`, hex digits, delimiters, multi-byte text.
fn pieces() -> impl Strategy<Value = String> {
    let piece = prop_oneof![
        Just("%".to_owned()),
        Just("%2F".to_owned()),
        Just("%2f".to_owned()),
        Just("%FF".to_owned()),
        Just("%C3".to_owned()),
        Just("%A9".to_owned()),
        Just("%25".to_owned()),
        Just("/".to_owned()),
        Just("?".to_owned()),
        Just("é".to_owned()),
        Just(".txt".to_owned()),
        Just("data".to_owned()),
        "[0-9a-fA-F]{1,2}",
        "[a-z]{1,3}",
    ];
    prop::collection::vec(piece, 0..10).prop_map(|p| p.concat())
}

/// For any text between the literals of `test://template/{id}/data`, the
/// matcher agrees with the reference: a match exactly when the raw text is
/// non-empty without `/`, `?` or `#`, and decodes to UTF-8 without `/`; the
/// variable is that decoded text.
#[test]
fn any_match_is_the_decoded_text_and_never_holds_a_slash() {
    let t = ResourceTemplate::new("test://template/{id}/data", "d");
    fuzz::runner(5_000, 42)
        .run(&pieces(), |raw| {
            let uri = format!("test://template/{raw}/data");
            let plain = !raw.is_empty() && !raw.contains(['/', '?', '#']);
            let expected = String::from_utf8(decode(&raw))
                .ok()
                .filter(|text| plain && !text.contains('/'));
            let got = t
                .matches(&uri)
                .map(|vars| vars["id"].as_str().unwrap_or_default().to_owned());
            prop_assert_eq!(got, expected, "{}", uri);
            Ok(())
        })
        .unwrap();
}

/// Over templates with several variables, `{var}` values never hold `/` and
/// `{+var}` values are never empty, whatever the URI.
#[test]
fn simple_variables_never_hold_a_slash_in_any_template() {
    let templates = [
        ResourceTemplate::new("x://{a}/{b}", "ab"),
        ResourceTemplate::new("x://{+p}/{name}.txt", "p"),
    ];
    let uris = (prop_oneof![Just("x://"), Just("x:///")], pieces())
        .prop_map(|(p, rest)| format!("{p}{rest}"));
    fuzz::runner(5_000, 43)
        .run(&uris, |uri| {
            for t in &templates {
                let Some(vars) = t.matches(&uri) else {
                    continue;
                };
                for (name, value) in &vars {
                    let value = value.as_str().unwrap_or_default();
                    let reserved = t.uri_template.contains(&format!("{{+{name}}}"));
                    prop_assert!(!value.is_empty(), "{}: empty {}", uri, name);
                    prop_assert!(
                        reserved || !value.contains('/'),
                        "{} matched {} with {} = {:?}",
                        t.uri_template,
                        uri,
                        name,
                        value
                    );
                }
            }
            Ok(())
        })
        .unwrap();
}
