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
    /// The session was DELETEd: end its stream.
    Delete {
        /// The session.
        sid: String,
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
            self.node.bus().subscribe(
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
        Control::Delete { sid } => {
            params.insert("sid".into(), Value::from(sid));
            params.insert("op".into(), Value::from("delete"));
        }
    }
    SharedNotification::new(Notification::new(CONTROL, params))
}

/// Queues the control messages for this node's GET streams.
struct ControlSink(mpsc::Sender<Control>);

fn parse_control(msg: &SharedNotification) -> Option<Control> {
    if msg.method() != CONTROL {
        return None;
    }
    let message: Value = serde_json::from_slice(msg.legacy()).ok()?;
    let params = message.get("params")?;
    let sid = params.get("sid")?.as_str()?.to_owned();
    let op = params.get("op")?.as_str()?;
    if op == "delete" {
        return Some(Control::Delete { sid });
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

    #[test]
    fn control_messages_read_back_as_sent() {
        let sub = control_message(Control::Uri {
            sid: "s1".into(),
            uri: "note://1".into(),
            subscribe: true,
            ack: "a1".into(),
        });
        assert!(matches!(
            parse_control(&sub),
            Some(Control::Uri { sid, uri, subscribe: true, ack }) if sid == "s1" && uri == "note://1" && ack == "a1"
        ));
        let unsub = control_message(Control::Uri {
            sid: "s1".into(),
            uri: "note://1".into(),
            subscribe: false,
            ack: "a2".into(),
        });
        assert!(matches!(
            parse_control(&unsub),
            Some(Control::Uri {
                subscribe: false,
                ..
            })
        ));
        let gone = control_message(Control::Delete { sid: "s2".into() });
        assert!(matches!(parse_control(&gone), Some(Control::Delete { sid }) if sid == "s2"));
        let other = SharedNotification::new(Notification::new("x/y", Map::new()));
        assert!(parse_control(&other).is_none());
    }
}
