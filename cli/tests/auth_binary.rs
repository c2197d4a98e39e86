//! `genmcp serve --auth-tokens FILE --max-streams-per-principal 2`, the real
//! binary: 401 with the metadata URL, the metadata document, a token reaching
//! the handler with its principal, and the per-principal stream limit.

#[path = "../../tests/common/mod.rs"]
mod common;

use std::net::SocketAddr;
use std::process::{Child, Command};

use common::{Exchange, headers, post, request};
use serde_json::{Value, json};

struct Served {
    child: Child,
    addr: SocketAddr,
    tokens: std::path::PathBuf,
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        if !self.tokens.as_os_str().is_empty() {
            let _ = std::fs::remove_file(&self.tokens);
        }
    }
}

fn serve(extra: &[&str]) -> Served {
    // One file per call: tests run in parallel and each removes its own.
    static NEXT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    let tokens =
        std::env::temp_dir().join(format!("genmcp-auth-tokens-{}-{n}", std::process::id()));
    std::fs::write(
        &tokens,
        "tok-admin ada admin\ntok-user bob\ntok-carol carol\n",
    )
    .unwrap();
    let mut args = vec!["--auth-tokens".to_owned(), tokens.display().to_string()];
    args.extend(extra.iter().map(|a| (*a).to_owned()));
    spawn(&args, tokens)
}

/// Starts `genmcp serve` on a port of its own choosing (`--port 0`, the
/// address read from its listening line: a port picked here and released
/// could be taken by another test's server first) with `auth_args`;
/// `tokens` is a file to remove afterwards (empty: none).
fn spawn(auth_args: &[String], tokens: std::path::PathBuf) -> Served {
    let mut args = vec!["--port", "0", "--workers", "1"];
    args.extend(auth_args.iter().map(String::as_str));
    let (child, addr) = common::serve_child::spawn_serve(&args, &[]);
    Served {
        child,
        addr,
        tokens,
    }
}

fn auth(mut h: Vec<(String, String)>, token: Option<&str>) -> Vec<(String, String)> {
    if let Some(t) = token {
        h.push(("Authorization".into(), format!("Bearer {t}")));
    }
    h
}

fn whoami(addr: SocketAddr, token: Option<&str>) -> common::Response {
    post(
        addr,
        &auth(headers("tools/call", Some("whoami")), token),
        &request(json!(1), "tools/call", json!({"name": "whoami"})),
    )
}

fn listen(addr: SocketAddr, token: &str, id: i64, notifications: Value) -> Exchange {
    let body = request(
        json!(id),
        "subscriptions/listen",
        json!({ "notifications": notifications }),
    );
    Exchange::open(
        addr,
        &auth(headers("subscriptions/listen", None), Some(token)),
        body.to_string().as_bytes(),
    )
}

#[test]
fn the_binary_authenticates_publishes_its_metadata_and_limits_streams_per_principal() {
    let srv = serve(&["--max-streams-per-principal", "2"]);
    let base = format!("http://{}", srv.addr);

    // No token: 401 pointing at the metadata document, which names the resource.
    let refused = whoami(srv.addr, None);
    assert_eq!(refused.status, 401);
    let challenge = refused.header("www-authenticate").unwrap().to_owned();
    let url = format!("{base}/.well-known/oauth-protected-resource/mcp");
    assert_eq!(challenge, format!("Bearer resource_metadata=\"{url}\""));
    let path = url.strip_prefix(&base).unwrap();
    let doc = Exchange::open_at(srv.addr, "GET", path, &[], b"").into_response();
    assert_eq!(doc.status, 200);
    let doc: Value = serde_json::from_slice(&doc.body).expect("the metadata parses as JSON");
    assert_eq!(doc["resource"], format!("{base}/mcp"));
    assert!(doc["authorization_servers"].is_array());

    // A valid token reaches the handler with its principal.
    let ok = whoami(srv.addr, Some("tok-user"));
    assert_eq!(ok.status, 200, "{}", String::from_utf8_lossy(&ok.body));
    assert_eq!(
        ok.json()["result"]["structuredContent"],
        json!({"principal": "bob", "admin": false})
    );

    // Two streams for bob, the third is 429 with Retry-After.
    let asked = json!({"toolsListChanged": true, "resourcesListChanged": true});
    let mut held = Vec::new();
    for id in 0..2 {
        let mut s = listen(srv.addr, "tok-user", id, asked.clone());
        assert_eq!(s.status, 200);
        // bob is no admin: the demo narrows him (the seed's downgrade).
        assert_eq!(
            s.next_message().unwrap()["params"]["notifications"],
            json!({"toolsListChanged": true})
        );
        held.push(s);
    }
    let third = listen(srv.addr, "tok-user", 2, asked.clone()).into_response();
    assert_eq!(
        third.status,
        429,
        "{}",
        String::from_utf8_lossy(&third.body)
    );
    assert!(third.header("retry-after").is_some());
    assert_eq!(
        third.json()["error"]["data"]["limit"],
        "max_streams_per_principal"
    );
    // Another principal still opens streams (and, as admin, gets its filter).
    let mut ada = listen(srv.addr, "tok-admin", 3, asked.clone());
    assert_eq!(ada.status, 200);
    assert_eq!(
        ada.next_message().unwrap()["params"]["notifications"],
        asked
    );
    let mut carol = listen(srv.addr, "tok-carol", 4, asked.clone());
    assert_eq!(carol.status, 200);
    carol.next_message().unwrap();
}

fn fixture(name: &str) -> String {
    format!("{}/../tests/fixtures/{name}", env!("CARGO_MANIFEST_DIR"))
}

/// `--jwks FILE --issuer URL --audience URL`: a JWT signed by the fixture key
/// for that audience reaches the handler; one for another audience is 401.
#[test]
fn the_binary_validates_jwts_against_a_jwks_file() {
    use base64::Engine as _;
    use jsonwebtoken::{Algorithm, EncodingKey, Header};
    let issuer = "https://auth.example.test";
    let audience = "https://mcp.example.test/mcp";
    let srv = spawn(
        &[
            "--jwks".to_owned(),
            fixture("jwks.json"),
            "--issuer".to_owned(),
            issuer.to_owned(),
            "--audience".to_owned(),
            audience.to_owned(),
        ],
        std::path::PathBuf::new(),
    );
    let pem = std::fs::read_to_string(fixture("jwt-es256.pem")).unwrap();
    let der = base64::engine::general_purpose::STANDARD
        .decode(
            pem.lines()
                .filter(|l| !l.starts_with("-----"))
                .collect::<String>(),
        )
        .unwrap();
    let exp = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs()
        + 600;
    let sign = |aud: &str| {
        let mut header = Header::new(Algorithm::ES256);
        header.kid = Some("test-key".into());
        jsonwebtoken::encode(
            &header,
            &json!({"iss": issuer, "aud": aud, "sub": "ada", "exp": exp}),
            &EncodingKey::from_ec_der(&der),
        )
        .unwrap()
    };
    let ok = whoami(srv.addr, Some(&sign(audience)));
    assert_eq!(ok.status, 200, "{}", String::from_utf8_lossy(&ok.body));
    assert_eq!(ok.json()["result"]["structuredContent"]["principal"], "ada");
    let refused = whoami(srv.addr, Some(&sign("https://other.example.test/mcp")));
    assert_eq!(refused.status, 401);
    assert_eq!(
        refused.header("www-authenticate"),
        Some(
            "Bearer resource_metadata=\"https://mcp.example.test/.well-known/oauth-protected-resource/mcp\", error=\"invalid_token\", error_description=\"wrong audience\""
        )
    );
}

/// A token file that cannot be read or parsed stops `genmcp serve` before it
/// binds, with the reason (and never a token) on stderr.
#[test]
fn a_bad_token_file_is_refused_at_start() {
    let path = std::env::temp_dir().join(format!("genmcp-bad-tokens-{}", std::process::id()));
    std::fs::write(&path, "secret-token carol root\n").unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_genmcp"))
        .args(["serve", "--port", "0", "--auth-tokens"])
        .arg(&path)
        .output()
        .expect("genmcp runs");
    let _ = std::fs::remove_file(&path);
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("token table line 1"), "{stderr}");
    assert!(!stderr.contains("secret-token"), "{stderr}");
}

#[test]
fn the_binary_names_its_resource_url_and_refuses_a_foreign_host() {
    let srv = serve(&[
        "--resource-url",
        "https://mcp.example.test/mcp",
        "--auth-failures-per-minute",
        "2",
    ]);
    let refused = whoami(srv.addr, None);
    assert_eq!(
        refused.header("www-authenticate"),
        Some(
            "Bearer resource_metadata=\"https://mcp.example.test/.well-known/oauth-protected-resource/mcp\""
        )
    );
    let path = "/.well-known/oauth-protected-resource/mcp";
    let doc = Exchange::open_at(srv.addr, "GET", path, &[], b"").into_response();
    assert_eq!(doc.json()["resource"], "https://mcp.example.test/mcp");
    let host = [("Host".to_owned(), "evil.example".to_owned())];
    let evil = Exchange::open_at(srv.addr, "GET", path, &host, b"").into_response();
    assert_eq!(evil.status, 403);
    // Two failed authentications, then 429 before the token is checked.
    assert_eq!(whoami(srv.addr, Some("guess-1")).status, 401);
    assert_eq!(whoami(srv.addr, Some("guess-2")).status, 401);
    let limited = whoami(srv.addr, Some("tok-user"));
    assert_eq!(limited.status, 429);
    assert!(limited.header("retry-after").is_some());
}
