//! Control messages to the node holding a session's GET stream: their form on
//! the bus, sending them, and hearing this node's.

use std::sync::Arc;

use serde_json::{Map, Value};
use tokio::sync::mpsc;

use super::{SharedSessions, unavailable};
use crate::mux::SharedNotification;
use crate::protocol::{McpError, Notification};
use crate::pubsub::{DeliverFuture, Inbox, InboxError, InboxSink};

/// The method of a control message to the node holding a session's GET
/// stream.
const CONTROL: &str = "genmcp/sessions/control";

/// Control messages waiting to be applied on this node.
const CONTROL_QUEUE: usize = 1_024;

/// What another node asks of the one holding a session's GET stream.
#[derive(Debug)]
pub(crate) enum Control {
    /// One URI was subscribed (`true`) or unsubscribed.
    Uri {
        /// The session.
        sid: String,
        /// The resource URI.
        uri: String,
        /// `resources/subscribe`.
        subscribe: bool,
        /// Where the holder writes the outcome ([`SharedSessions::applied`]).
        ack: String,
    },
    /// A node prepared to take over the session's stream, which this node
    /// offers as it drains ([`super::Prepared`]): cut it.
    Cut {
        /// The session.
        sid: String,
        /// The taker's token (16 hex digits).
        token: String,
    },
    /// The session was DELETEd: end its stream.
    Delete {
        /// The session.
        sid: String,
        /// Where the holder confirms that the stream ended (`None` from a
        /// node that waits for no confirmation).
        ack: Option<String>,
    },
}

impl SharedSessions {
    pub(super) async fn send(&self, node: &str, control: Control) -> Result<(), McpError> {
        let msg = control_message(control);
        self.node
            .bus()
            .publish_remote_wait(&format!("sess-ctl/{node}"), &[msg])
            .await
            .map_err(|e| unavailable(&e))
    }

    /// Subscribes this node to its control topic, once: the control messages
    /// come out of the returned receiver (`None` after the first call).
    pub(crate) fn listen(&self) -> Option<mpsc::Receiver<Control>> {
        let mut rx = None;
        self.control.get_or_init(|| {
            let (tx, r) = mpsc::channel(CONTROL_QUEUE);
            rx = Some(r);
            // Durable: heard again after every lost Redis session.
            self.node.bus().subscribe_durable(
                format!("sess-ctl/{}", self.node.node()),
                Inbox::from_sink(Arc::new(ControlSink(tx))),
            )
        });
        rx
    }
}

/// The bus message carrying `control`.
fn control_message(control: Control) -> SharedNotification {
    let mut params = Map::new();
    match control {
        Control::Uri {
            sid,
            uri,
            subscribe,
            ack,
        } => {
            params.insert("sid".into(), Value::from(sid));
            params.insert("uri".into(), Value::from(uri));
            params.insert("ack".into(), Value::from(ack));
            params.insert(
                "op".into(),
                Value::from(if subscribe {
                    "subscribe"
                } else {
                    "unsubscribe"
                }),
            );
        }
        Control::Cut { sid, token } => {
            params.insert("sid".into(), Value::from(sid));
            params.insert("op".into(), Value::from("cut"));
            params.insert("token".into(), Value::from(token));
        }
        Control::Delete { sid, ack } => {
            params.insert("sid".into(), Value::from(sid));
            params.insert("op".into(), Value::from("delete"));
            if let Some(ack) = ack {
                params.insert("ack".into(), Value::from(ack));
            }
        }
    }
    SharedNotification::new(Notification::new(CONTROL, params))
}

/// Queues the control messages for this node's GET streams.
struct ControlSink(mpsc::Sender<Control>);

/// The longest session id or URI a control message may carry (a URI is at
/// most 2 KiB when it is recorded; a sid is 32 hex digits).
const MAX_FIELD: usize = 4 * 1024;

/// Reads a control message from the bus (a front door like any other: a
/// message of another shape, with an oversized field, or whose `ack` is not
/// the session's own acknowledgement key is ignored).
fn parse_control(msg: &SharedNotification) -> Option<Control> {
    if msg.method() != CONTROL {
        return None;
    }
    let control = read_control(msg)?;
    let own_ack = |sid: &str, ack: &str| {
        ack.strip_prefix(&format!("sess:{{{sid}}}:ack:"))
            .is_some_and(|n| n.len() == 16 && n.bytes().all(|b| b.is_ascii_hexdigit()))
    };
    let hex16 = |t: &str| t.len() == 16 && t.bytes().all(|b| b.is_ascii_hexdigit());
    let (sid, fields_fit) = match &control {
        Control::Delete { sid, ack } => (sid, ack.as_deref().is_none_or(|a| own_ack(sid, a))),
        Control::Cut { sid, token } => (sid, hex16(token)),
        Control::Uri { sid, uri, ack, .. } => (sid, uri.len() <= MAX_FIELD && own_ack(sid, ack)),
    };
    (sid.len() <= MAX_FIELD && !sid.contains(['{', '}']) && fields_fit).then_some(control)
}

fn read_control(msg: &SharedNotification) -> Option<Control> {
    let message: Value = serde_json::from_slice(msg.legacy()).ok()?;
    let params = message.get("params")?;
    let sid = params.get("sid")?.as_str()?.to_owned();
    let op = params.get("op")?.as_str()?;
    if op == "cut" {
        let token = params.get("token")?.as_str()?.to_owned();
        return Some(Control::Cut { sid, token });
    }
    if op == "delete" {
        let ack = match params.get("ack") {
            None => None,
            Some(ack) => Some(ack.as_str()?.to_owned()),
        };
        return Some(Control::Delete { sid, ack });
    }
    let uri = params.get("uri")?.as_str()?.to_owned();
    let ack = params.get("ack")?.as_str()?.to_owned();
    Some(Control::Uri {
        sid,
        uri,
        ack,
        subscribe: match op {
            "subscribe" => true,
            "unsubscribe" => false,
            _ => return None,
        },
    })
}

impl InboxSink<SharedNotification> for ControlSink {
    fn try_deliver(&self, msg: SharedNotification) -> Result<(), InboxError> {
        if let Some(control) = parse_control(&msg)
            && let Err(e) = self.0.try_send(control)
        {
            tracing::warn!(error = %e, "session control message dropped");
            if self.0.is_closed() {
                return Err(InboxError::Closed);
            }
        }
        Ok(())
    }

    fn deliver(&self, msg: SharedNotification) -> DeliverFuture {
        let done = self.try_deliver(msg);
        Box::pin(async move { done })
    }

    fn is_closed(&self) -> bool {
        self.0.is_closed()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ACK1: &str = "sess:{s1}:ack:00000000000000a1";

    #[test]
    fn an_ack_that_is_not_the_sessions_own_key_is_ignored() {
        for ack in [
            "anything",
            "sess:{s2}:ack:00000000000000a1",
            "sess:{s1}:ack:zz",
            "notes",
        ] {
            let msg = control_message(Control::Uri {
                sid: "s1".into(),
                uri: "note://1".into(),
                subscribe: true,
                ack: ack.into(),
            });
            assert!(parse_control(&msg).is_none(), "{ack}");
        }
        let long = control_message(Control::Delete {
            sid: "s".repeat(MAX_FIELD + 1),
            ack: None,
        });
        assert!(parse_control(&long).is_none());
        let foreign = control_message(Control::Delete {
            sid: "s1".into(),
            ack: Some("sess:{s2}:ack:00000000000000a1".into()),
        });
        assert!(parse_control(&foreign).is_none());
        assert!(parse_control(&long).is_none());
    }

    proptest::proptest! {
        /// Whatever a control message carries, reading it never panics, and
        /// what is read back is what was sent or nothing.
        #[test]
        fn reading_any_control_message_never_panics(
            sid in ".{0,40}",
            uri in ".{0,64}",
            ack in ".{0,64}",
            op in 0u8..4,
        ) {
            let control = match op {
                0 => Control::Delete { sid: sid.clone(), ack: None },
                3 => Control::Cut { sid: sid.clone(), token: ack },
                _ => Control::Uri { sid: sid.clone(), uri, subscribe: op == 1, ack },
            };
            if let Some(read) = parse_control(&control_message(control)) {
                let read_sid = match read {
                    Control::Delete { sid, .. } | Control::Uri { sid, .. } | Control::Cut { sid, .. } => sid,
                };
                proptest::prop_assert_eq!(read_sid, sid);
            }
        }
    }

    #[test]
    fn control_messages_read_back_as_sent() {
        let sub = control_message(Control::Uri {
            sid: "s1".into(),
            uri: "note://1".into(),
            subscribe: true,
            ack: ACK1.into(),
        });
        assert!(matches!(
            parse_control(&sub),
            Some(Control::Uri { sid, uri, subscribe: true, ack }) if sid == "s1" && uri == "note://1" && ack == ACK1
        ));
        let unsub = control_message(Control::Uri {
            sid: "s1".into(),
            uri: "note://1".into(),
            subscribe: false,
            ack: "sess:{s1}:ack:00000000000000a2".into(),
        });
        assert!(matches!(
            parse_control(&unsub),
            Some(Control::Uri {
                subscribe: false,
                ..
            })
        ));
        let gone = control_message(Control::Delete {
            sid: "s2".into(),
            ack: Some("sess:{s2}:ack:00000000000000a3".into()),
        });
        assert!(
            matches!(parse_control(&gone), Some(Control::Delete { sid, ack: Some(ack) }) if sid == "s2" && ack.ends_with("a3"))
        );
        let old = control_message(Control::Delete {
            sid: "s2".into(),
            ack: None,
        });
        assert!(matches!(
            parse_control(&old),
            Some(Control::Delete { ack: None, .. })
        ));
        let cut = control_message(Control::Cut {
            sid: "s3".into(),
            token: "00000000000000a4".into(),
        });
        assert!(
            matches!(parse_control(&cut), Some(Control::Cut { sid, token }) if sid == "s3" && token.ends_with("a4"))
        );
        let bad_token = control_message(Control::Cut {
            sid: "s3".into(),
            token: "sess:{s3}:x".into(),
        });
        assert!(parse_control(&bad_token).is_none());
        let other = SharedNotification::new(Notification::new("x/y", Map::new()));
        assert!(parse_control(&other).is_none());
    }
}
