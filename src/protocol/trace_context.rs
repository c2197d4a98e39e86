//! W3C Trace Context (`traceparent`, `tracestate`) as a client sends it in a
//! request's `_meta` (the MCP OpenTelemetry conventions) or, over HTTP, in
//! headers. Plain parsing, no I/O and no OpenTelemetry types: an invalid value
//! is ignored (the request is served as the root of a new trace), never an
//! error to the client, as the W3C recommendation asks.

use serde_json::{Map, Value};

/// The longest `tracestate` kept (the W3C limit a vendor must propagate:
/// 512 bytes); a longer one is dropped.
pub const MAX_TRACESTATE_LEN: usize = 512;

/// The most `tracestate` list members (W3C: 32); a value with more is dropped.
pub const MAX_TRACESTATE_MEMBERS: usize = 32;

/// A parsed `traceparent`: the caller's trace id, its span id (the parent of
/// the server's span) and its trace flags.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TraceParent {
    /// The 16-byte trace id (never all zero).
    pub trace_id: [u8; 16],
    /// The caller's 8-byte span id (never all zero).
    pub parent_id: [u8; 8],
    /// The trace flags (bit 0: sampled).
    pub flags: u8,
}

impl TraceParent {
    /// Parses a `traceparent` value (version `00`, or a later version read as
    /// `00` as the W3C spec asks). Returns `None` for anything malformed:
    /// upper-case hex, all-zero ids, version `ff`, wrong length.
    ///
    /// ```
    /// use genmcp::protocol::trace_context::TraceParent;
    /// let p = TraceParent::parse("00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01")
    ///     .expect("valid");
    /// assert!(p.sampled());
    /// assert_eq!(p.trace_id_hex(), "0af7651916cd43dd8448eb211c80319c");
    /// assert!(TraceParent::parse("00-0AF7651916CD43DD8448EB211C80319C-b7ad6b7169203331-01").is_none());
    /// ```
    pub fn parse(value: &str) -> Option<TraceParent> {
        let s = value.trim_matches(|c| c == ' ' || c == '\t').as_bytes();
        if s.len() < 55 {
            return None;
        }
        let version = hex_byte(&s[0..2])?;
        if version == 0xff || s[2] != b'-' || s[35] != b'-' || s[52] != b'-' {
            return None;
        }
        // Version 00 is exactly 55 bytes; a later version may append fields
        // after a dash.
        if (version == 0 && s.len() != 55) || (s.len() > 55 && s[55] != b'-') {
            return None;
        }
        let mut trace_id = [0u8; 16];
        for (i, b) in trace_id.iter_mut().enumerate() {
            *b = hex_byte(&s[3 + 2 * i..5 + 2 * i])?;
        }
        let mut parent_id = [0u8; 8];
        for (i, b) in parent_id.iter_mut().enumerate() {
            *b = hex_byte(&s[36 + 2 * i..38 + 2 * i])?;
        }
        let flags = hex_byte(&s[53..55])?;
        if trace_id == [0; 16] || parent_id == [0; 8] {
            return None;
        }
        Some(TraceParent {
            trace_id,
            parent_id,
            flags,
        })
    }

    /// Whether the caller sampled its span (flag bit 0).
    pub fn sampled(&self) -> bool {
        self.flags & 1 == 1
    }

    /// The trace id as 32 lower-case hex digits.
    pub fn trace_id_hex(&self) -> String {
        data_encoding::HEXLOWER.encode(&self.trace_id)
    }

    /// The parent span id as 16 lower-case hex digits.
    pub fn parent_id_hex(&self) -> String {
        data_encoding::HEXLOWER.encode(&self.parent_id)
    }
}

/// One lower-case hex byte (two digits).
fn hex_byte(two: &[u8]) -> Option<u8> {
    let digit = |c: u8| match c {
        b'0'..=b'9' => Some(c - b'0'),
        b'a'..=b'f' => Some(c - b'a' + 10),
        _ => None,
    };
    match two {
        [h, l] => Some(digit(*h)? << 4 | digit(*l)?),
        _ => None,
    }
}

/// Whether `value` is a `tracestate` worth passing on: at most
/// [`MAX_TRACESTATE_LEN`] bytes and [`MAX_TRACESTATE_MEMBERS`] members, each
/// `key=value` with the W3C key and value characters.
pub fn valid_tracestate(value: &str) -> bool {
    if value.len() > MAX_TRACESTATE_LEN {
        return false;
    }
    let mut members = 0;
    for member in value.split(',') {
        let member = member.trim_matches(|c| c == ' ' || c == '\t');
        if member.is_empty() {
            continue;
        }
        members += 1;
        if members > MAX_TRACESTATE_MEMBERS {
            return false;
        }
        let Some((key, val)) = member.split_once('=') else {
            return false;
        };
        let key_ok = !key.is_empty()
            && key.len() <= 256
            && key
                .bytes()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || b"_-*/@".contains(&c));
        let val_ok = !val.is_empty()
            && val.len() <= 256
            && val
                .bytes()
                .all(|c| (0x20..=0x7e).contains(&c) && c != b',' && c != b'=');
        if !key_ok || !val_ok {
            return false;
        }
    }
    true
}

/// The caller's trace context: its `traceparent` and, when valid, its
/// `tracestate`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TraceContext {
    /// The parsed `traceparent`.
    pub parent: TraceParent,
    /// The `tracestate`, when sent and valid.
    pub state: Option<String>,
}

impl TraceContext {
    /// Reads the context from a `traceparent` and an optional `tracestate`
    /// value: `None` unless the `traceparent` is valid; an invalid
    /// `tracestate` is left out.
    pub fn from_values(traceparent: &str, tracestate: Option<&str>) -> Option<TraceContext> {
        let parent = TraceParent::parse(traceparent)?;
        let state = tracestate
            .filter(|s| valid_tracestate(s))
            .map(|s| s.trim().to_owned())
            .filter(|s| !s.is_empty());
        Some(TraceContext { parent, state })
    }

    /// Reads the context from a request's `_meta` map (the `traceparent` and
    /// `tracestate` keys, as strings).
    ///
    /// ```
    /// use genmcp::protocol::trace_context::TraceContext;
    /// let meta = serde_json::json!({
    ///     "traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
    ///     "tracestate": "vendor=abc"
    /// });
    /// let cx = TraceContext::from_meta(meta.as_object().unwrap()).expect("valid");
    /// assert_eq!(cx.state.as_deref(), Some("vendor=abc"));
    /// ```
    pub fn from_meta(meta: &Map<String, Value>) -> Option<TraceContext> {
        let traceparent = meta.get("traceparent")?.as_str()?;
        let tracestate = meta.get("tracestate").and_then(Value::as_str);
        Self::from_values(traceparent, tracestate)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const VALID: &str = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";

    #[test]
    fn the_w3c_examples_parse_and_malformed_values_do_not() {
        let p = TraceParent::parse(VALID).expect("valid");
        assert_eq!(p.parent_id_hex(), "b7ad6b7169203331");
        assert_eq!(p.flags, 1);
        let unsampled = TraceParent::parse(&VALID.replace("-01", "-00")).expect("valid");
        assert!(!unsampled.sampled());
        // A later version with an extra field is read as version 00.
        assert!(TraceParent::parse(&format!("cc{}-extra", &VALID[2..])).is_some());
        for bad in [
            "",
            "00",
            &VALID[..54],
            &format!("{VALID}0"),
            &format!("ff{}", &VALID[2..]),
            "00-00000000000000000000000000000000-b7ad6b7169203331-01",
            "00-0af7651916cd43dd8448eb211c80319c-0000000000000000-01",
            "00-0af7651916cd43dd8448eb211c80319c_b7ad6b7169203331-01",
            "00-0af7651916cd43dd8448eb211c80319g-b7ad6b7169203331-01",
            &format!("cc{}x", &VALID[2..]),
        ] {
            assert_eq!(TraceParent::parse(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn tracestate_is_kept_only_when_well_formed_and_bounded() {
        assert!(valid_tracestate("rojo=00f067aa0ba902b7,congo=t61rcWkgMzE"));
        assert!(valid_tracestate("a@b=1, c/d=2"));
        assert!(!valid_tracestate("Upper=1"));
        assert!(!valid_tracestate("novalue"));
        assert!(!valid_tracestate("k=v=w"));
        let many: Vec<String> = (0..33).map(|i| format!("k{i}=v")).collect();
        assert!(!valid_tracestate(&many.join(",")));
        assert!(!valid_tracestate(&format!("k={}", "v".repeat(600))));
        let cx = TraceContext::from_values(VALID, Some("Bad State")).expect("parent kept");
        assert_eq!(cx.state, None);
    }
}
