//! The seed's second `subscribe` example over real HTTP: an application hook puts
//! the authenticated principal into the request's assigns, and the handler
//! downgrades non-admins to tool changes only.

mod common;

use std::sync::Arc;

use common::{Exchange, headers, listen, request};
use genmcp::prelude::*;
use serde_json::json;

#[derive(Debug, PartialEq)]
enum Role {
    Admin,
    User,
}

struct Downgrade;

impl SubscriptionHandler for Downgrade {
    type Message = ();
    type State = ();

    fn subscribe(
        &self,
        filter: &SubscriptionFilter,
        cx: &mut SubscribeCx<'_, ()>,
    ) -> Subscribe<()> {
        match cx.assigns().get::<Role>() {
            Some(Role::Admin) => Subscribe::Accept(()),
            _ => Subscribe::Narrow(
                SubscriptionFilter {
                    tools_list_changed: filter.tools_list_changed,
                    ..Default::default()
                },
                (),
            ),
        }
    }

    fn handle_message(&self, _msg: (), _channel: &Channel, _state: &mut ()) -> Flow {
        Flow::Continue
    }

    fn subscription_capabilities(&self, _channel: &Channel) -> SubscriptionCapabilities {
        SubscriptionCapabilities::all()
    }
}

fn server() -> ServerThread {
    let mut config = common::config();
    config.assigns = Some(Arc::new(|req: &actix_web::HttpRequest| {
        match req
            .headers()
            .get("authorization")
            .and_then(|v| v.to_str().ok())
        {
            Some("Bearer admin") => Ok(Assigns::new().with(Role::Admin)),
            Some("Bearer user") => Ok(Assigns::new().with(Role::User)),
            Some(_) => Err("unknown token".to_owned()),
            None => Ok(Assigns::new()),
        }
    }));
    ServerThread::spawn(
        || {
            Suite::builder(Implementation::new("auth", "1"))
                .subscriptions(Downgrade)
                .build()
        },
        config,
    )
    .expect("server starts")
}

fn ack_for(srv: &ServerThread, token: Option<&str>) -> serde_json::Value {
    let mut h = headers("subscriptions/listen", None);
    if let Some(t) = token {
        h.push(("Authorization".into(), format!("Bearer {t}")));
    }
    let body = request(
        json!(1),
        "subscriptions/listen",
        json!({"notifications": {"toolsListChanged": true, "promptsListChanged": true}}),
    );
    let mut s = Exchange::open(srv.addr, &h, body.to_string().as_bytes());
    assert_eq!(s.status, 200);
    s.next_message().unwrap()["params"]["notifications"].clone()
}

#[test]
fn admins_get_what_they_asked_for_and_others_are_narrowed() {
    let srv = server();
    assert_eq!(
        ack_for(&srv, Some("admin")),
        json!({"toolsListChanged": true, "promptsListChanged": true})
    );
    assert_eq!(
        ack_for(&srv, Some("user")),
        json!({"toolsListChanged": true})
    );
    assert_eq!(ack_for(&srv, None), json!({"toolsListChanged": true}));
}

#[test]
fn a_refused_token_is_401() {
    let srv = server();
    let mut h = headers("subscriptions/listen", None);
    h.push(("Authorization".into(), "Bearer forged".into()));
    let body = request(
        json!(1),
        "subscriptions/listen",
        json!({"notifications": {"toolsListChanged": true}}),
    );
    let resp = Exchange::open(srv.addr, &h, body.to_string().as_bytes()).into_response();
    assert_eq!(resp.status, 401);
    assert_eq!(resp.header("www-authenticate"), Some("Bearer"));
    // Without the header the same request is served.
    let mut s = listen(srv.addr, json!(2), json!({"toolsListChanged": true}));
    assert_eq!(
        s.next_message().unwrap()["method"],
        "notifications/subscriptions/acknowledged"
    );
}
