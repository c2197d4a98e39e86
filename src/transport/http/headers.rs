//! Header checks of Streamable HTTP: Host/Origin allow-list, Accept/Content-Type,
//! and the routing headers (`MCP-Protocol-Version`, `Mcp-Method`, `Mcp-Name`).

use std::borrow::Cow;

use actix_web::HttpRequest;
use actix_web::http::header::{self, HeaderMap, HeaderName};

use serde_json::{Map, Value};

use crate::protocol::trace_context::TraceContext;
use crate::protocol::{McpError, methods};
use crate::suite::ParamHeader;

/// `MCP-Protocol-Version`.
pub const PROTOCOL_VERSION: &str = "mcp-protocol-version";
/// `Mcp-Method`.
pub const METHOD: &str = "mcp-method";
/// `Mcp-Name`.
pub const NAME: &str = "mcp-name";

/// [`PROTOCOL_VERSION`] as a header name. Look headers up by these: a lookup
/// by `&str` in actix-web's `HeaderMap` parses and copies the name each time.
pub(crate) static PROTOCOL_VERSION_HEADER: HeaderName = HeaderName::from_static(PROTOCOL_VERSION);
/// [`METHOD`] as a header name.
pub(crate) static METHOD_HEADER: HeaderName = HeaderName::from_static(METHOD);
/// [`NAME`] as a header name.
pub(crate) static NAME_HEADER: HeaderName = HeaderName::from_static(NAME);

/// The hostname part of a `Host` header value or an origin's authority.
fn hostname(authority: &str) -> &str {
    if let Some(rest) = authority.strip_prefix('[') {
        // [::1]:8080
        return rest.split(']').next().unwrap_or(rest);
    }
    authority.split(':').next().unwrap_or(authority)
}

/// Whether `host` (a hostname, no port) is in `allowed` (`"*"` allows any).
fn host_allowed(host: &str, allowed: &[String]) -> bool {
    allowed
        .iter()
        .any(|a| a == "*" || a.eq_ignore_ascii_case(host))
}

/// DNS-rebinding protection: a `Host` or `Origin` naming a host outside
/// `allowed_hosts` is refused. An absent `Host` (HTTP/1.0 allows it) is refused
/// too unless `allowed_hosts` contains `"*"`; an absent `Origin` is accepted.
pub fn check_host_and_origin(req: &HttpRequest, allowed_hosts: &[String]) -> Result<(), String> {
    check_host(req, allowed_hosts)?;
    if let Some(origin) = req.headers().get(header::ORIGIN) {
        let origin = origin
            .to_str()
            .map_err(|_| "invalid Origin header".to_owned())?;
        let authority = origin
            .split_once("://")
            .map(|(_, rest)| rest)
            .unwrap_or(origin)
            .split('/')
            .next()
            .unwrap_or_default();
        if origin == "null" || !host_allowed(hostname(authority), allowed_hosts) {
            return Err(format!("Origin {origin:?} is not allowed"));
        }
    }
    Ok(())
}

/// The `Host` half of [`check_host_and_origin`] (for documents a browser may
/// fetch from any origin, such as the Protected Resource Metadata).
pub fn check_host(req: &HttpRequest, allowed_hosts: &[String]) -> Result<(), String> {
    match req.headers().get(header::HOST) {
        Some(host) => {
            let host = host
                .to_str()
                .map_err(|_| "invalid Host header".to_owned())?;
            if !host_allowed(hostname(host.trim()), allowed_hosts) {
                return Err(format!("Host {host:?} is not allowed"));
            }
        }
        None if allowed_hosts.iter().any(|a| a == "*") => {}
        None => return Err("a Host header is required".to_owned()),
    }
    Ok(())
}

/// Whether `authority` (`name[:port]`, as in `Host`) names an allowed host and
/// holds nothing but what an authority may (no path, user info or spaces).
pub(super) fn authority_allowed(authority: &str, allowed_hosts: &[String]) -> bool {
    let authority = authority.trim();
    !authority.is_empty()
        && authority
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b".-:[]_".contains(&b))
        && host_allowed(hostname(authority), allowed_hosts)
}

/// Calls `each` with the media types of every `name` header in order,
/// without their parameters; `None` when a value is not visible ASCII.
fn media_types<'a>(
    headers: &'a HeaderMap,
    name: header::HeaderName,
    mut each: impl FnMut(&'a str),
) -> Option<()> {
    for value in headers.get_all(name) {
        for part in value.to_str().ok()?.split(',') {
            let media = part.split(';').next().unwrap_or_default().trim();
            if !media.is_empty() {
                each(media);
            }
        }
    }
    Some(())
}

/// Whether `Accept` admits `wanted` (absent Accept admits everything).
/// Media types compare without regard to case.
pub fn accepts(headers: &HeaderMap, wanted: &str) -> bool {
    if !headers.contains_key(header::ACCEPT) {
        return true;
    }
    let family = wanted.split('/').next().unwrap_or_default();
    let mut admitted = false;
    let readable = media_types(headers, header::ACCEPT, |t| {
        admitted |= t.eq_ignore_ascii_case(wanted)
            || t == "*/*"
            || t.strip_suffix("/*")
                .is_some_and(|f| f.eq_ignore_ascii_case(family));
    });
    readable.is_some() && admitted
}

/// Whether the body is declared as JSON.
pub fn is_json(headers: &HeaderMap) -> bool {
    let mut first = None;
    let readable = media_types(headers, header::CONTENT_TYPE, |t| {
        first.get_or_insert(t);
    });
    readable.is_some() && first.is_some_and(|m| m.eq_ignore_ascii_case("application/json"))
}

/// Reads a single-valued routing header: `Ok(None)` when absent, `-32020` when
/// repeated or not visible ASCII. Surrounding whitespace is trimmed.
pub fn routing_header<'a>(
    headers: &'a HeaderMap,
    name: &header::HeaderName,
) -> Result<Option<&'a str>, McpError> {
    let mut values = headers.get_all(name);
    let Some(first) = values.next() else {
        return Ok(None);
    };
    if values.next().is_some() {
        return Err(McpError::HeaderMismatch(format!(
            "Header mismatch: {name} header appears more than once"
        )));
    }
    let value = first.to_str().map_err(|_| {
        McpError::HeaderMismatch(format!(
            "Header mismatch: {name} header has invalid characters"
        ))
    })?;
    Ok(Some(value.trim_matches([' ', '\t'])))
}

/// Decodes a header value that may use the `=?base64?...?=` sentinel.
pub fn decode_value(raw: &str) -> Result<String, McpError> {
    match raw
        .strip_prefix("=?base64?")
        .and_then(|rest| rest.strip_suffix("?="))
    {
        Some(encoded) => data_encoding::BASE64
            .decode(encoded.as_bytes())
            .ok()
            .and_then(|bytes| String::from_utf8(bytes).ok())
            .ok_or_else(|| {
                McpError::HeaderMismatch(format!(
                    "Header mismatch: invalid base64 in header value {raw:?}"
                ))
            }),
        None => Ok(raw.to_owned()),
    }
}

/// `Mcp-Method` (already read with [`routing_header`]) against the body's
/// method: `-32020` when they differ. Absence is the caller's business (the
/// 2026-07-28 path requires the header, the 2025 path checks it when present).
pub(crate) fn check_method_header(header: Option<&str>, method: &str) -> Result<(), McpError> {
    match header {
        Some(h) if h != method => Err(McpError::HeaderMismatch(format!(
            "Header mismatch: Mcp-Method header value '{h}' does not match body value '{method}'"
        ))),
        _ => Ok(()),
    }
}

/// `Mcp-Name` (already read with [`routing_header`]) against the body's
/// `name` (`tools/call`, `prompts/get`) or `uri` (`resources/read`): `-32020`
/// when it differs or does not decode, and when it is absent while `required`.
/// Other methods carry no name: nothing to check.
pub(crate) fn check_name_header(
    header: Option<&str>,
    method: &str,
    params: &Map<String, Value>,
    required: bool,
) -> Result<(), McpError> {
    let field = match method {
        methods::TOOLS_CALL | methods::PROMPTS_GET => "name",
        methods::RESOURCES_READ => "uri",
        m if crate::suite::tasks::is_task_method(m) => "taskId",
        _ => return Ok(()),
    };
    let Some(raw) = header else {
        if required {
            return Err(McpError::HeaderMismatch(
                "Header mismatch: required Mcp-Name header is missing".into(),
            ));
        }
        return Ok(());
    };
    let decoded = decode_value(raw)?;
    let body = params
        .get(field)
        .and_then(Value::as_str)
        .unwrap_or_default();
    if decoded != body {
        return Err(McpError::HeaderMismatch(format!(
            "Header mismatch: Mcp-Name header value '{decoded}' does not match body value '{body}'"
        )));
    }
    Ok(())
}

/// Checks the `Mcp-Param-*` headers a call declares (`expected`, from
/// `Suite::param_headers`): each one must be present (when `required`) and
/// agree with its argument ([`check_param_header`]).
pub(crate) fn check_param_headers(
    headers: &HeaderMap,
    expected: &[ParamHeader],
    required: bool,
) -> Result<(), McpError> {
    expected
        .iter()
        .try_for_each(|param| check_param_header(headers, param, required))
}

/// Checks one `Mcp-Param-*` header against its argument: missing (when
/// `required`), undecodable or different is `-32020`. Integers compare
/// numerically, booleans as `true`/`false`.
pub fn check_param_header(
    headers: &HeaderMap,
    expected: &ParamHeader,
    required: bool,
) -> Result<(), McpError> {
    let missing = || {
        McpError::HeaderMismatch(format!(
            "Header mismatch: required {} header is missing",
            expected.header
        ))
    };
    let found = match HeaderName::from_bytes(expected.header.as_bytes()) {
        Ok(name) => routing_header(headers, &name)?,
        // Not a name a header can have, so no client sent it.
        Err(_) => None,
    };
    let Some(raw) = found else {
        return if required { Err(missing()) } else { Ok(()) };
    };
    let decoded = decode_value(raw)?;
    let matches = match &expected.value {
        Value::String(s) => *s == decoded,
        Value::Bool(b) => decoded == if *b { "true" } else { "false" },
        Value::Number(n) => match (n.as_i64(), decoded.parse::<i64>()) {
            (Some(a), Ok(b)) => a == b,
            _ => n.to_string() == decoded,
        },
        _ => false,
    };
    if matches {
        Ok(())
    } else {
        Err(McpError::HeaderMismatch(format!(
            "Header mismatch: {} header value '{decoded}' does not match the argument",
            expected.header
        )))
    }
}

/// The W3C trace context of a request's headers, as W3C Trace Context says
/// to read it: exactly one `traceparent` (a request with two or more is
/// treated as having none, and a new trace starts), and every `tracestate`
/// header joined into one list (kept when the list is valid). The
/// `traceparent` as sent, and the context read from it.
pub(crate) fn header_trace(head: &HeaderMap) -> Option<(&str, TraceContext)> {
    let mut parents = head.get_all("traceparent");
    let parent = parents.next()?.to_str().ok()?;
    if parents.next().is_some() {
        return None;
    }
    // Borrowed when there is one header (a request's usual case); a header
    // that is not text makes the whole list invalid.
    let mut state: Option<Cow<'_, str>> = None;
    for value in head.get_all("tracestate") {
        let Ok(value) = value.to_str() else {
            state = None;
            break;
        };
        state = Some(match state {
            None => Cow::Borrowed(value),
            Some(list) => Cow::Owned(format!("{list},{value}")),
        });
    }
    TraceContext::from_values(parent, state.as_deref()).map(|cx| (parent, cx))
}

/// Copies the HTTP `traceparent` (and a valid `tracestate`, see
/// [`header_trace`]) into `meta` when `meta` has no valid `traceparent` of
/// its own and the header's is valid: a listen's, and a 2025-era GET
/// stream's (a GET has no `_meta` of its own), so that the stream's span
/// takes its parent from them.
pub(crate) fn trace_into_meta(req: &HttpRequest, meta: &mut Map<String, Value>) {
    if TraceContext::from_meta(meta).is_some() {
        return;
    }
    let Some((parent, cx)) = header_trace(req.headers()) else {
        return;
    };
    meta.insert("traceparent".into(), Value::from(parent));
    match cx.state {
        Some(state) => meta.insert("tracestate".into(), Value::from(state)),
        None => meta.remove("tracestate"),
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    fn head(pairs: &[(HeaderName, &'static str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (name, value) in pairs {
            map.append(name.clone(), header::HeaderValue::from_static(value));
        }
        map
    }

    #[test]
    fn media_types_match_without_case_parameters_or_order() {
        let h = head(&[
            (header::ACCEPT, "Text/Event-Stream;q=0.9"),
            (header::ACCEPT, " application/* "),
        ]);
        assert!(accepts(&h, "application/json"));
        assert!(accepts(&h, "text/event-stream"));
        assert!(!accepts(&h, "image/png"));
        assert!(accepts(&head(&[(header::ACCEPT, "*/*")]), "image/png"));
        assert!(accepts(&head(&[]), "image/png"));
        assert!(!accepts(
            &head(&[(header::ACCEPT, "text/html")]),
            "text/event-stream"
        ));
        assert!(is_json(&head(&[(
            header::CONTENT_TYPE,
            "Application/JSON; charset=utf-8"
        )])));
        assert!(!is_json(&head(&[(
            header::CONTENT_TYPE,
            "text/plain, application/json"
        )])));
        assert!(!is_json(&head(&[])));
        // A value that is not visible ASCII admits nothing, wherever it is.
        let mut odd = head(&[(header::ACCEPT, "application/json")]);
        let bytes = header::HeaderValue::from_bytes(b"text/\xff").unwrap();
        odd.append(header::ACCEPT, bytes);
        assert!(!accepts(&odd, "application/json"));
    }

    #[test]
    fn routing_headers_are_single_and_trimmed() {
        let h = head(&[(METHOD_HEADER.clone(), " tools/call\t")]);
        assert_eq!(
            routing_header(&h, &METHOD_HEADER).unwrap(),
            Some("tools/call")
        );
        assert_eq!(routing_header(&h, &NAME_HEADER).unwrap(), None);
        let twice = head(&[(NAME_HEADER.clone(), "a"), (NAME_HEADER.clone(), "b")]);
        let err = routing_header(&twice, &NAME_HEADER).unwrap_err();
        assert!(
            err.to_string()
                .contains("mcp-name header appears more than once"),
            "{err}"
        );
    }

    #[test]
    fn hostnames_are_read_from_authorities() {
        assert_eq!(hostname("127.0.0.1:8080"), "127.0.0.1");
        assert_eq!(hostname("localhost"), "localhost");
        assert_eq!(hostname("[::1]:9"), "::1");
        assert_eq!(hostname("evil.example.com"), "evil.example.com");
    }

    #[test]
    fn base64_sentinel_is_strict() {
        assert_eq!(decode_value("plain").unwrap(), "plain");
        assert_eq!(decode_value("=?base64?SGVsbG8=?=").unwrap(), "Hello");
        assert!(decode_value("=?base64?SGVsbG8?=").is_err());
        assert_eq!(
            decode_value("=?BASE64?SGVsbG8=?=").unwrap(),
            "=?BASE64?SGVsbG8=?="
        );
        assert_eq!(
            decode_value("=?base64?SGVsbG8=").unwrap(),
            "=?base64?SGVsbG8="
        );
    }

    const PARENT: &str = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";
    const OTHER: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

    fn trace_of(h: &HeaderMap) -> Option<(String, Option<String>)> {
        header_trace(h).map(|(p, cx)| (p.to_owned(), cx.state))
    }

    #[test]
    fn one_traceparent_is_the_parent_and_tracestate_headers_join() {
        let tp = HeaderName::from_static("traceparent");
        let ts = HeaderName::from_static("tracestate");
        assert_eq!(
            trace_of(&head(&[(tp.clone(), PARENT), (ts.clone(), "a=1")])),
            Some((PARENT.to_owned(), Some("a=1".to_owned())))
        );
        // Several tracestate headers are one list, in order.
        assert_eq!(
            trace_of(&head(&[
                (tp.clone(), PARENT),
                (ts.clone(), "a=1,b=2"),
                (ts.clone(), "c=3")
            ])),
            Some((PARENT.to_owned(), Some("a=1,b=2,c=3".to_owned())))
        );
        // A joined list that is not valid is left out, the parent kept.
        assert_eq!(
            trace_of(&head(&[
                (tp.clone(), PARENT),
                (ts.clone(), "a=1"),
                (ts, "bad")
            ])),
            Some((PARENT.to_owned(), None))
        );
    }

    #[test]
    fn two_traceparent_headers_are_no_parent() {
        let tp = HeaderName::from_static("traceparent");
        // Even the same value twice: W3C says to start a new trace.
        for second in [OTHER, PARENT] {
            assert_eq!(
                trace_of(&head(&[(tp.clone(), PARENT), (tp.clone(), second)])),
                None
            );
        }
        assert_eq!(trace_of(&head(&[(tp, "00-bad")])), None);
        assert_eq!(trace_of(&head(&[])), None);
    }
}
