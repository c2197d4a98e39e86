//! The Protected Resource Metadata document (RFC 9728) over real HTTP: it
//! passes the Host allow-list of the endpoint, its `resource` never comes
//! from the client's `Host` or an untrusted `X-Forwarded-*`, and a mounted
//! scope shows in the document and in the challenge's `resource_metadata`.

mod common;

use actix_web::{App, HttpServer, web};
use common::user_server::UserServer;
use common::{Exchange, Response, headers, post, request};
use genmcp::http::auth::{AuthConfig, TokenTable};
use genmcp::http::{Endpoint, HttpConfig, ServerThread};
use serde_json::json;

const ROOT: &str = "/.well-known/oauth-protected-resource";
const PATH_FORM: &str = "/.well-known/oauth-protected-resource/mcp";

fn auth() -> AuthConfig {
    AuthConfig::new(TokenTable::parse("tok-user bob\n").unwrap())
        .authorization_server("https://as.test")
}

fn serve(edit: impl FnOnce(&mut HttpConfig)) -> ServerThread {
    let mut config = common::config();
    config.auth = Some(auth());
    edit(&mut config);
    ServerThread::spawn(|| genmcp_cli::demo::suite().0, config).expect("server starts")
}

fn get(addr: std::net::SocketAddr, path: &str, h: &[(&str, &str)]) -> Response {
    let h: Vec<(String, String)> = h
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect();
    Exchange::open_at(addr, "GET", path, &h, b"").into_response()
}

fn metadata_url_of(resp: &Response) -> String {
    let challenge = resp.header("www-authenticate").expect("a challenge");
    let start = challenge
        .find("resource_metadata=\"")
        .expect("resource_metadata")
        + 19;
    let end = challenge[start..].find('"').unwrap() + start;
    challenge[start..end].to_owned()
}

#[test]
fn a_host_outside_the_allow_list_is_refused_as_on_the_endpoint() {
    let srv = serve(|_| {});
    for path in [ROOT, PATH_FORM] {
        let resp = get(srv.addr, path, &[("Host", "evil.example")]);
        assert_eq!(resp.status, 403, "{path}");
        assert!(
            !String::from_utf8_lossy(&resp.body).contains("http://evil.example"),
            "{path}"
        );
        // The endpoint itself answers the same.
        let mut h = headers("tools/call", Some("whoami"));
        h.push(("Host".into(), "evil.example".into()));
        let mcp = post(
            srv.addr,
            &h,
            &request(json!(1), "tools/call", json!({"name": "whoami"})),
        );
        assert_eq!(mcp.status, 403);
        // An allowed Host still gets the document, naming the listening address.
        let ok = get(srv.addr, path, &[("Host", "localhost")]);
        assert_eq!(ok.status, 200, "{path}");
        assert_eq!(ok.json()["resource"], format!("http://{}/mcp", srv.addr));
    }
}

#[test]
fn forwarded_headers_from_an_untrusted_peer_change_nothing() {
    let srv = serve(|_| {});
    let forged = [
        ("X-Forwarded-Proto", "https"),
        ("X-Forwarded-Host", "localhost:8443"),
        ("Forwarded", "proto=https;host=localhost"),
    ];
    let expected = format!("http://{}/mcp", srv.addr);
    for path in [ROOT, PATH_FORM] {
        let doc = get(srv.addr, path, &forged);
        assert_eq!(doc.status, 200);
        assert_eq!(doc.json()["resource"], expected, "{path}");
    }
    let mut h = headers("tools/call", Some("whoami"));
    h.extend(
        forged
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned())),
    );
    let refused = post(
        srv.addr,
        &h,
        &request(json!(1), "tools/call", json!({"name": "whoami"})),
    );
    assert_eq!(refused.status, 401);
    assert_eq!(
        metadata_url_of(&refused),
        format!("http://{}{PATH_FORM}", srv.addr)
    );
}

#[test]
fn a_trusted_proxy_forwards_scheme_and_allowed_host() {
    let srv = serve(|c| {
        c.trusted_proxies = vec!["127.0.0.1".parse().unwrap()];
        c.allowed_hosts.push("mcp.example.com".into());
    });
    let doc = get(
        srv.addr,
        PATH_FORM,
        &[
            ("X-Forwarded-Proto", "https"),
            ("X-Forwarded-Host", "mcp.example.com"),
        ],
    );
    assert_eq!(doc.status, 200);
    assert_eq!(doc.json()["resource"], "https://mcp.example.com/mcp");
    assert!(
        doc.header("vary")
            .is_some_and(|v| v.contains("X-Forwarded-Host"))
    );
    // Even from the proxy, a host outside the allow-list is not believed.
    let doc = get(
        srv.addr,
        PATH_FORM,
        &[
            ("X-Forwarded-Proto", "https"),
            ("X-Forwarded-Host", "evil.example"),
        ],
    );
    assert_eq!(doc.json()["resource"], format!("http://{}/mcp", srv.addr));
}

#[test]
fn a_configured_resource_is_named_whatever_the_request_says() {
    let srv = serve(|c| {
        c.auth = Some(auth().resource("https://mcp.example.com/mcp"));
        c.allowed_hosts = vec!["*".into()];
    });
    let doc = get(
        srv.addr,
        PATH_FORM,
        &[("Host", "evil.example"), ("X-Forwarded-Proto", "http")],
    );
    assert_eq!(doc.status, 200);
    assert_eq!(doc.json()["resource"], "https://mcp.example.com/mcp");
}

/// The endpoint inside `web::scope("/api")` of an application's own server.
fn scoped() -> UserServer {
    let mut config = common::config();
    config.auth = Some(auth());
    let mcp = Endpoint::new(genmcp_cli::demo::suite().0, config);
    UserServer::spawn(move || {
        let drain = mcp.drain_handle();
        let http =
            HttpServer::new(move || App::new().service(web::scope("/api").service(mcp.service())))
                .workers(1)
                .disable_signals()
                .shutdown_timeout(1)
                .bind(("127.0.0.1", 0))?;
        let addr = http.addrs()[0];
        Ok((http.run(), addr, drain))
    })
}

#[test]
fn a_mounted_scope_shows_in_the_resource_and_the_challenge() {
    let srv = scoped();
    let base = format!("http://{}", srv.addr);
    let refused = Exchange::open_at(
        srv.addr,
        "POST",
        "/api/mcp",
        &headers("tools/call", Some("whoami")),
        request(json!(1), "tools/call", json!({"name": "whoami"}))
            .to_string()
            .as_bytes(),
    )
    .into_response();
    assert_eq!(refused.status, 401);
    let url = metadata_url_of(&refused);
    assert_eq!(url, format!("{base}/api{PATH_FORM}"));
    // The challenge's URL serves the document, and so does the root form
    // under the scope; both name the mounted endpoint.
    for path in [url.strip_prefix(&base).unwrap(), &format!("/api{ROOT}")] {
        let doc = get(srv.addr, path, &[]);
        assert_eq!(doc.status, 200, "{path}");
        assert_eq!(doc.json()["resource"], format!("{base}/api/mcp"), "{path}");
    }
    drop(srv);
}
