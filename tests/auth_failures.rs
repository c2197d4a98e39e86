//! Failed authentications are bounded per client address: past the limit a
//! request with a token gets 429 with `Retry-After` before the authenticator
//! runs; another address is still served; and without a peer address (a Unix
//! socket) the limits share one key instead of switching off.

mod common;

use std::io::{Read, Write};
use std::net::SocketAddr;
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use actix_web::{App, HttpServer};
use common::user_server::UserServer;
use common::{Response, headers, post, request};
use genmcp::http::auth::{AuthConfig, AuthFuture, Authenticator, TokenTable};
use genmcp::http::{Endpoint, HttpConfig, RateLimit};
use serde_json::{Value, json};

/// The test table, counting every call.
struct Counting {
    table: TokenTable,
    calls: Arc<AtomicUsize>,
}

impl Authenticator for Counting {
    fn authenticate(&self, token: &str) -> AuthFuture {
        self.calls.fetch_add(1, Ordering::SeqCst);
        self.table.authenticate(token)
    }
}

/// Authentication by the counting table, 20 failures allowed per address and
/// (so the test never sees a refill) one back per hour.
fn counted_auth() -> (AuthConfig, Arc<AtomicUsize>) {
    let calls = Arc::new(AtomicUsize::new(0));
    let auth = AuthConfig::new(Counting {
        table: TokenTable::parse("tok-user bob\n").unwrap(),
        calls: calls.clone(),
    });
    let mut limit = RateLimit::per_minute(20);
    limit.per_second = 1.0 / 3600.0;
    (auth.failure_limit(Some(limit)), calls)
}

fn whoami_body() -> Value {
    request(json!(1), "tools/call", json!({"name": "whoami"}))
}

fn whoami_headers(token: Option<&str>) -> Vec<(String, String)> {
    let mut h = headers("tools/call", Some("whoami"));
    if let Some(t) = token {
        h.push(("Authorization".into(), format!("Bearer {t}")));
    }
    h
}

fn whoami(addr: SocketAddr, token: Option<&str>) -> Response {
    post(addr, &whoami_headers(token), &whoami_body())
}

/// The demo endpoint on an application server listening on 127.0.0.1 and on
/// [::1] (same port): two client addresses on one machine.
fn dual_stack(config: HttpConfig) -> (UserServer, SocketAddr, SocketAddr) {
    let mcp = Endpoint::new(genmcp_cli::demo::suite().0, config);
    let srv = UserServer::spawn(move || {
        let drain = mcp.drain_handle();
        let http = HttpServer::new(move || App::new().service(mcp.service()))
            .workers(1)
            .disable_signals()
            .shutdown_timeout(1)
            .bind(("127.0.0.1", 0))?;
        let v4 = http.addrs()[0];
        let http = http.bind(("::1", v4.port()))?;
        Ok((http.run(), v4, drain))
    });
    let v4 = srv.addr;
    let v6 = SocketAddr::from((std::net::Ipv6Addr::LOCALHOST, v4.port()));
    (srv, v4, v6)
}

#[test]
fn three_hundred_bad_tokens_get_401s_then_429s_and_the_authenticator_stops_running() {
    let (auth, calls) = counted_auth();
    let mut config = common::config();
    config.auth = Some(auth);
    let (srv, v4, v6) = dual_stack(config);
    let mut statuses = Vec::new();
    for i in 0..300 {
        let resp = whoami(v4, Some(&format!("guess-{i}")));
        if resp.status == 429 {
            let wait: u64 = resp
                .header("retry-after")
                .expect("Retry-After")
                .parse()
                .unwrap();
            assert!(wait >= 1, "{wait}");
            assert_eq!(resp.json()["error"]["data"]["limit"], "auth_failures");
            assert!(resp.header("www-authenticate").is_none());
        }
        statuses.push(resp.status);
    }
    assert_eq!(statuses[..20], [401; 20]);
    assert!(statuses[20..].iter().all(|s| *s == 429), "{statuses:?}");
    assert_eq!(calls.load(Ordering::SeqCst), 20, "the authenticator ran");
    // While limited, a good token from that address waits too, unchecked.
    assert_eq!(whoami(v4, Some("tok-user")).status, 429);
    assert_eq!(calls.load(Ordering::SeqCst), 20);
    // A request without a token runs nothing: still told how to get one.
    assert_eq!(whoami(v4, None).status, 401);
    // Another client address is not affected.
    let ok = whoami(v6, Some("tok-user"));
    assert_eq!(ok.status, 200, "{}", String::from_utf8_lossy(&ok.body));
    assert_eq!(ok.json()["result"]["structuredContent"]["principal"], "bob");
    assert_eq!(whoami(v6, Some("another-guess")).status, 401);
    assert_eq!(calls.load(Ordering::SeqCst), 22);
    drop(srv);
}

#[test]
fn good_tokens_and_missing_scopes_do_not_count_as_failures() {
    let (auth, calls) = counted_auth();
    let mut config = common::config();
    config.auth = Some(auth.require_scopes(["admin"]));
    let (srv, v4, _) = dual_stack(config);
    for _ in 0..40 {
        assert_eq!(whoami(v4, Some("tok-user")).status, 403);
        assert_eq!(whoami(v4, None).status, 401);
    }
    assert_eq!(calls.load(Ordering::SeqCst), 40);
    // The budget of failures is still whole.
    for i in 0..20 {
        assert_eq!(whoami(v4, Some(&format!("guess-{i}"))).status, 401);
    }
    assert_eq!(whoami(v4, Some("guess")).status, 429);
    drop(srv);
}

#[test]
fn the_failure_limit_is_on_by_default() {
    let auth = AuthConfig::new(TokenTable::parse("t bob\n").unwrap());
    let limit = auth.failure_limit.expect("on by default");
    assert_eq!(
        limit.burst,
        genmcp::http::auth::DEFAULT_AUTH_FAILURES_PER_MINUTE
    );
    assert_eq!(limit.burst, 20);
    assert!((limit.per_second * 60.0 - 20.0).abs() < 1e-9);
}

/// The endpoint on a Unix socket: requests have no peer address.
struct UdsServer {
    path: PathBuf,
    _srv: UserServer,
}

impl Drop for UdsServer {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

fn on_unix_socket(name: &str, config: HttpConfig) -> UdsServer {
    let path = std::env::temp_dir().join(format!("genmcp-{name}-{}.sock", std::process::id()));
    let _ = std::fs::remove_file(&path);
    let mcp = Endpoint::new(genmcp_cli::demo::suite().0, config);
    let socket = path.clone();
    let srv = UserServer::spawn(move || {
        let drain = mcp.drain_handle();
        let http = HttpServer::new(move || App::new().service(mcp.service()))
            .workers(1)
            .disable_signals()
            .shutdown_timeout(1)
            .bind_uds(&socket)?;
        // UserServer wants an address; nothing listens on it.
        Ok((http.run(), SocketAddr::from(([127, 0, 0, 1], 9)), drain))
    });
    UdsServer { path, _srv: srv }
}

/// One request over the Unix socket at `path`; the status code.
fn status_over_uds(path: &Path, token: Option<&str>) -> u16 {
    let mut stream = UnixStream::connect(path).expect("connect");
    stream
        .set_read_timeout(Some(Duration::from_secs(20)))
        .unwrap();
    let body = whoami_body().to_string();
    let mut head = "POST /mcp HTTP/1.1\r\nHost: localhost\r\n".to_owned();
    for (k, v) in whoami_headers(token) {
        head.push_str(&format!("{k}: {v}\r\n"));
    }
    head.push_str(&format!(
        "Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    ));
    stream.write_all(head.as_bytes()).unwrap();
    let mut reply = Vec::new();
    let _ = stream.read_to_end(&mut reply);
    let text = String::from_utf8_lossy(&reply);
    text.split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("no status line in {text:?}"))
}

#[test]
fn without_a_peer_address_the_request_rate_is_still_limited() {
    let mut config = common::config();
    // A burst of 2, refilling one request per 1,000 s: no refill in the test.
    let mut rate = RateLimit::per_second(1).burst(2);
    rate.per_second = 0.001;
    config.rate_limit = Some(rate);
    let uds = on_unix_socket("rate", config);
    let statuses: Vec<u16> = (0..4).map(|_| status_over_uds(&uds.path, None)).collect();
    assert_eq!(statuses, [200, 200, 429, 429]);
}

#[test]
fn without_a_peer_address_failed_authentications_are_still_limited() {
    let (auth, calls) = counted_auth();
    let mut config = common::config();
    config.auth = Some(auth);
    let uds = on_unix_socket("auth", config);
    let statuses: Vec<u16> = (0..25)
        .map(|i| status_over_uds(&uds.path, Some(&format!("guess-{i}"))))
        .collect();
    assert_eq!(statuses[..20], [401; 20]);
    assert_eq!(statuses[20..], [429; 5]);
    assert_eq!(calls.load(Ordering::SeqCst), 20);
}

/// Opens a listen over the Unix socket at `path` and returns the connection,
/// held open, and its status code (read from the response head).
fn listen_over_uds(path: &Path, id: u64) -> (UnixStream, u16) {
    let mut stream = UnixStream::connect(path).expect("connect");
    stream
        .set_read_timeout(Some(Duration::from_secs(20)))
        .unwrap();
    let body = common::request(
        json!(id),
        "subscriptions/listen",
        json!({"notifications": {"toolsListChanged": true}}),
    )
    .to_string();
    let mut head = "POST /mcp HTTP/1.1\r\nHost: localhost\r\n".to_owned();
    for (k, v) in common::headers("subscriptions/listen", None) {
        head.push_str(&format!("{k}: {v}\r\n"));
    }
    head.push_str(&format!("Content-Length: {}\r\n\r\n{body}", body.len()));
    stream.write_all(head.as_bytes()).unwrap();
    let mut seen = Vec::new();
    let mut byte = [0u8; 1];
    while !seen.ends_with(b"\r\n") {
        match stream.read(&mut byte) {
            Ok(1) => seen.push(byte[0]),
            _ => break,
        }
    }
    let text = String::from_utf8_lossy(&seen).into_owned();
    let status = text
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("no status line in {text:?}"));
    (stream, status)
}

#[test]
fn without_a_peer_address_open_streams_are_still_limited() {
    let mut config = common::config();
    config.limits.max_streams_per_principal = Some(2);
    let uds = on_unix_socket("streams", config);
    let (_a, first) = listen_over_uds(&uds.path, 1);
    let (_b, second) = listen_over_uds(&uds.path, 2);
    let (_c, third) = listen_over_uds(&uds.path, 3);
    assert_eq!([first, second, third], [200, 200, 429]);
}

/// A table whose every answer takes 300 ms, counting the calls: concurrent
/// requests are all in the authenticator at once.
struct Slow {
    table: TokenTable,
    calls: Arc<AtomicUsize>,
}

impl Authenticator for Slow {
    fn authenticate(&self, token: &str) -> AuthFuture {
        self.calls.fetch_add(1, Ordering::SeqCst);
        let answer = self.table.authenticate(token);
        Box::pin(async move {
            actix_web::rt::time::sleep(Duration::from_millis(300)).await;
            answer.await
        })
    }
}

#[test]
fn concurrent_bad_tokens_never_run_the_authenticator_past_the_limit() {
    let calls = Arc::new(AtomicUsize::new(0));
    let mut limit = RateLimit::per_minute(20);
    limit.per_second = 1.0 / 3600.0;
    let auth = AuthConfig::new(Slow {
        table: TokenTable::parse("tok-user bob\n").unwrap(),
        calls: calls.clone(),
    })
    .failure_limit(Some(limit));
    let mut config = common::config();
    config.auth = Some(auth);
    let (srv, v4, v6) = dual_stack(config);
    // 60 bad tokens at once from one address: the limit is 20 failures, so
    // at most 20 may reach the authenticator, however they interleave.
    let statuses: Vec<u16> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..60)
            .map(|i| s.spawn(move || whoami(v4, Some(&format!("guess-{i}"))).status))
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let refused = statuses.iter().filter(|s| **s == 429).count();
    let unauthorized = statuses.iter().filter(|s| **s == 401).count();
    assert_eq!(refused + unauthorized, 60, "{statuses:?}");
    assert_eq!(unauthorized, 20, "{statuses:?}");
    assert_eq!(calls.load(Ordering::SeqCst), 20, "the authenticator ran");
    // A good token does not spend the budget of another address, and its own
    // reservation is given back: 30 good requests in a row all pass.
    for _ in 0..30 {
        assert_eq!(whoami(v6, Some("tok-user")).status, 200);
    }
    for i in 0..20 {
        assert_eq!(whoami(v6, Some(&format!("bad-{i}"))).status, 401);
    }
    assert_eq!(whoami(v6, Some("bad")).status, 429);
    drop(srv);
}
