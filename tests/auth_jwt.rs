//! JWT access tokens: `JwtAuthenticator` against a fixed test JWKS
//! (`tests/fixtures/jwks.json`, the public half of `jwt-es256.pem`), then the
//! same checks through a real HTTP server.

mod common;

use std::time::{SystemTime, UNIX_EPOCH};

use base64::Engine as _;
use common::{Exchange, headers, request};
use genmcp::http::auth::{AuthConfig, AuthError, JwtAuthenticator};
use genmcp::prelude::*;
use jsonwebtoken::{Algorithm, EncodingKey, Header};
use serde_json::{Value, json};

const ISSUER: &str = "https://auth.example.test";
const AUDIENCE: &str = "http://127.0.0.1/mcp";

fn fixture(name: &str) -> String {
    std::fs::read_to_string(format!(
        "{}/tests/fixtures/{name}",
        env!("CARGO_MANIFEST_DIR")
    ))
    .expect("fixture")
}

/// The PKCS#8 DER inside a PEM file.
fn pem_der(name: &str) -> Vec<u8> {
    let body: String = fixture(name)
        .lines()
        .filter(|l| !l.starts_with("-----"))
        .collect();
    base64::engine::general_purpose::STANDARD
        .decode(body)
        .expect("PEM body")
}

fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs()
}

fn claims() -> Value {
    json!({
        "iss": ISSUER,
        "aud": AUDIENCE,
        "sub": "ada",
        "exp": now() + 600,
        "scope": "mcp:tools admin",
    })
}

fn sign_with(key_file: &str, claims: &Value) -> String {
    let mut header = Header::new(Algorithm::ES256);
    header.kid = Some("test-key".into());
    jsonwebtoken::encode(
        &header,
        claims,
        &EncodingKey::from_ec_der(&pem_der(key_file)),
    )
    .expect("signs")
}

fn sign(claims: &Value) -> String {
    sign_with("jwt-es256.pem", claims)
}

fn jwt() -> JwtAuthenticator {
    JwtAuthenticator::from_jwks(&fixture("jwks.json"), ISSUER, AUDIENCE).expect("JWKS loads")
}

fn refusal(token: &str) -> String {
    match jwt().verify(token) {
        Err(AuthError::InvalidToken(why)) => why,
        other => panic!("expected a refusal, got {other:?}"),
    }
}

#[test]
fn a_valid_token_gives_its_subject_and_scopes() {
    let p = jwt().verify(&sign(&claims())).expect("accepted");
    assert_eq!(p.subject(), "ada");
    assert!(p.has_scope("mcp:tools"));
    assert!(p.is_admin());
}

#[test]
fn wrong_audience_issuer_expiry_and_signature_are_each_refused() {
    let mut c = claims();
    c["aud"] = json!("https://other.example.test/mcp");
    assert_eq!(refusal(&sign(&c)), "wrong audience");

    let mut c = claims();
    c["iss"] = json!("https://evil.example.test");
    assert_eq!(refusal(&sign(&c)), "wrong issuer");

    let mut c = claims();
    c["exp"] = json!(now() - 3600); // past the 60 s leeway
    assert_eq!(refusal(&sign(&c)), "expired");

    // Signed by another key under the same kid.
    assert_eq!(
        refusal(&sign_with("jwt-other-es256.pem", &claims())),
        "bad signature"
    );
    // One changed claim under the original signature.
    let token = sign(&claims());
    let mut parts: Vec<&str> = token.split('.').collect();
    let mut forged = claims();
    forged["sub"] = json!("mallory");
    let body = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(forged.to_string());
    parts[1] = &body;
    assert_eq!(refusal(&parts.join(".")), "bad signature");
}

#[test]
fn claims_the_audience_binding_needs_are_required() {
    for missing in ["aud", "iss", "exp", "sub"] {
        let mut c = claims();
        c.as_object_mut().unwrap().remove(missing);
        assert!(jwt().verify(&sign(&c)).is_err(), "token without {missing}");
    }
    // Not yet valid.
    let mut c = claims();
    c["nbf"] = json!(now() + 3600);
    assert_eq!(refusal(&sign(&c)), "not yet valid");
}

/// The algorithm comes from the key, never from the token: an HS256 token
/// (signed with the JWKS's own `oct` secret, which is not loaded) and an
/// unsigned `alg: none` token are refused.
#[test]
fn algorithm_confusion_is_refused() {
    let mut header = Header::new(Algorithm::HS256);
    header.kid = Some("hmac-ignored".into());
    let hs = jsonwebtoken::encode(
        &header,
        &claims(),
        &EncodingKey::from_secret(b"0123456789abcdef0123456789abcdef").unwrap(),
    )
    .unwrap();
    assert_eq!(refusal(&hs), "no key for this token");
    // The classic confusion: HS256 under the EC key's kid, "signed" with the
    // public key's own bytes as the HMAC secret (anyone can read them).
    let jwks: Value =
        serde_json::from_str(include_str!("fixtures/jwks.json")).expect("the test JWKS");
    let public = jwks["keys"][0].to_string();
    let mut header = Header::new(Algorithm::HS256);
    header.kid = Some("test-key".into());
    let hs = jsonwebtoken::encode(
        &header,
        &claims(),
        &EncodingKey::from_secret(public.as_bytes()).unwrap(),
    )
    .unwrap();
    assert_eq!(refusal(&hs), "wrong algorithm");
    let b64 = |v: Value| base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(v.to_string());
    let none = format!(
        "{}.{}.",
        b64(json!({"alg": "none", "kid": "test-key"})),
        b64(claims())
    );
    assert_eq!(refusal(&none), "malformed", "alg none is not even parsed");
}

#[test]
fn a_jwks_without_a_verification_key_is_refused() {
    let only_secret = r#"{"keys": [{"kty": "oct", "k": "c2VjcmV0"}]}"#;
    assert!(matches!(
        JwtAuthenticator::from_jwks(only_secret, ISSUER, AUDIENCE),
        Err(AuthError::Config(_))
    ));
    assert!(JwtAuthenticator::from_jwks("not json", ISSUER, AUDIENCE).is_err());
}

fn whoami(srv: &ServerThread, token: Option<&str>) -> common::Response {
    let mut h = headers("tools/call", Some("whoami"));
    if let Some(t) = token {
        h.push(("Authorization".into(), format!("Bearer {t}")));
    }
    let body = request(json!(1), "tools/call", json!({"name": "whoami"}));
    Exchange::open(srv.addr, &h, body.to_string().as_bytes()).into_response()
}

#[test]
fn over_http_a_valid_jwt_reaches_the_tool_and_a_bad_one_gets_a_challenge() {
    let mut config = common::config();
    config.auth = Some(AuthConfig::jwt(jwt()).scopes_supported(["mcp:tools"]));
    let srv = ServerThread::spawn(|| genmcp_cli::demo::suite().0, config).unwrap();

    let ok = whoami(&srv, Some(&sign(&claims())));
    assert_eq!(ok.status, 200, "{}", String::from_utf8_lossy(&ok.body));
    assert_eq!(
        ok.json()["result"]["structuredContent"],
        json!({"principal": "ada", "admin": true})
    );

    let mut c = claims();
    c["aud"] = json!("https://other.example.test/mcp");
    let refused = whoami(&srv, Some(&sign(&c)));
    assert_eq!(refused.status, 401);
    let challenge = refused.header("www-authenticate").unwrap();
    assert!(
        challenge.starts_with(
            "Bearer resource_metadata=\"http://127.0.0.1/.well-known/oauth-protected-resource/mcp\""
        ),
        "{challenge}"
    );
    assert!(challenge.contains("error=\"invalid_token\""), "{challenge}");
    assert!(challenge.contains("wrong audience"), "{challenge}");

    // The metadata document names the audience as the resource and the issuer.
    let doc = Exchange::open_at(
        srv.addr,
        "GET",
        "/.well-known/oauth-protected-resource/mcp",
        &[],
        b"",
    )
    .into_response();
    assert_eq!(doc.status, 200);
    assert_eq!(
        doc.json(),
        json!({
            "resource": AUDIENCE,
            "authorization_servers": [ISSUER],
            "scopes_supported": ["mcp:tools"],
            "bearer_methods_supported": ["header"],
        })
    );
}
