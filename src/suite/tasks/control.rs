//! Forwarded changes: a `tasks/update` or `tasks/cancel` answered on one
//! node for a task running on another is sent to that node as a control
//! message (bus topic `tasks-ctl/<node>`) with an acknowledgement key
//! (`<prefix>task-ack:<ack>`), and is decided by that key:
//!
//! - the sender opens the key (`open`, 30 s), sends the message, and waits
//!   (at most [`FORWARD_WAIT`]) for the task's node to take it;
//! - the task's node checks the message like any request from outside
//!   (method, shape, sizes, a task of its own, the owner), takes the key
//!   (only while it is open), and only then applies the change;
//! - a sender that waited in vain takes the key itself and answers a
//!   retryable error; a message read later finds the key taken (or gone)
//!   and is not applied.
//!
//! Whoever takes the key decides, and both sides read the same answer: a
//! success is never answered for a change that is not applied, and a change
//! the client was told failed is never applied.

use std::sync::Weak;
use std::time::Duration;

use serde_json::{Map, Value};

use super::record::TaskRecord;
use super::shared::{SharedTasks, unavailable};
use super::supervisor::{Shared, Tasks, not_found, random_id};
use crate::mux::SharedNotification;
use crate::protocol::{McpError, Notification};
use crate::pubsub::{BusError, DeliverFuture, InboxError, InboxSink};
use crate::suite::sealing::seal;

/// The method of a control message to a task's node.
pub(crate) const CONTROL: &str = "genmcp/tasks/control";
/// Bytes of a task id, an owner key, in a control message (more: ignored).
const MAX_CONTROL_FIELD: usize = 1_024;
/// How long an acknowledgement key lives: far longer than the sender waits
/// (a message the owner reads after it is gone is never applied).
pub(crate) const ACK_LIFE: Duration = Duration::from_secs(30);
/// An acknowledgement key's value while nobody has decided.
const ACK_OPEN: &str = "open";

/// How long a `tasks/update` or `tasks/cancel` forwarded to another node
/// waits for that node to take the change (then the sender decides: not
/// applied, a retryable error).
pub(crate) const FORWARD_WAIT: Duration = Duration::from_secs(2);
/// How long, once the task's node took a forwarded change, the sender waits
/// more for the change to show in the shared copy (so that a `tasks/get` on
/// the sender's node right after shows it).
const COPY_WAIT: Duration = Duration::from_secs(2);
/// Control messages from other nodes waiting for this node's worker; past
/// it a message is dropped (its sender answers a retryable error).
pub(super) const CONTROL_QUEUE: usize = 1_024;

/// The error of a forwarded change that was not confirmed (nothing applied).
fn not_confirmed() -> McpError {
    McpError::internal(
        "Internal error: the task's node did not confirm the change in time; nothing was applied; retry later",
    )
}

/// Decides an acknowledgement key: takes it for `ARGV[1]` when still open;
/// answers who holds it (`''`: gone, nobody may apply the change).
const DECIDE_SCRIPT: &str = r#"
local cur = redis.call('GET', KEYS[1])
if cur == ARGV[2] then
  redis.call('SET', KEYS[1], ARGV[1], 'KEEPTTL')
  return ARGV[1]
end
if cur then return cur end
return ''
"#;

/// Who decided a forwarded change (see [`SharedTasks::decide`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Decided {
    /// The task's node took it: the change is (being) applied.
    Owner,
    /// The sender took it (it gave up waiting): the change is never applied.
    Sender,
    /// The key is gone (expired): nobody applies the change.
    Gone,
}

impl Decided {
    fn of(answer: &str) -> Decided {
        match answer {
            "owner" => Decided::Owner,
            "sender" => Decided::Sender,
            _ => Decided::Gone,
        }
    }
}

/// What a node asks of the node running a task.
#[derive(Debug)]
pub(crate) enum Control {
    /// `tasks/cancel`.
    Cancel,
    /// `tasks/update` with these answers.
    Update(Map<String, Value>),
}

/// A control message's parts, as the task's node reads them.
#[derive(Debug)]
pub(crate) struct ControlMsg {
    pub(crate) id: String,
    pub(crate) owner: String,
    pub(crate) control: Control,
    /// The acknowledgement key's name (32 hex digits).
    pub(crate) ack: String,
}

/// A control message's parts, checked like any request from outside: its
/// method, shape, sizes and acknowledgement key; `None` for anything else.
/// (The task's node checks the owner against its record before applying.)
pub(crate) fn parse_control(msg: &SharedNotification) -> Option<ControlMsg> {
    if msg.method() != CONTROL {
        return None;
    }
    let message: Value = serde_json::from_slice(msg.legacy()).ok()?;
    let params = message.get("params")?.as_object()?;
    let field = |name: &str| {
        params
            .get(name)?
            .as_str()
            .filter(|v| !v.is_empty() && v.len() <= MAX_CONTROL_FIELD)
            .map(str::to_owned)
    };
    let id = field("taskId")?;
    let owner = field("owner")?;
    let ack = field("ack").filter(|a| {
        a.len() == 32
            && a.bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
    })?;
    let control = match params.get("op")?.as_str()? {
        "cancel" => Control::Cancel,
        "update" => Control::Update(params.get("inputResponses")?.as_object()?.clone()),
        _ => return None,
    };
    Some(ControlMsg {
        id,
        owner,
        control,
        ack,
    })
}

impl SharedTasks {
    /// Opens the acknowledgement key `ack` (before its message is sent):
    /// the task's node may take it until it expires or the sender takes it.
    pub(crate) async fn open_ack(&self, ack: &str) -> Result<(), BusError> {
        let life = u64::try_from(ACK_LIFE.as_millis()).unwrap_or(u64::MAX);
        let until = crate::suite::sealing::seal::now_ms().saturating_add(life);
        let mut set = ::redis::cmd("SET");
        set.arg(self.keys().key(&format!("task-ack:{ack}")))
            .arg(ACK_OPEN)
            .arg("NX")
            .arg("PXAT")
            .arg(until);
        let _: Option<String> = self.keys().query(set).await?;
        Ok(())
    }

    /// Who has decided `ack` so far (`None`: still open).
    pub(crate) async fn ack_state(&self, ack: &str) -> Result<Option<Decided>, BusError> {
        let value: Option<String> = self
            .keys()
            .query({
                let mut get = ::redis::cmd("GET");
                get.arg(self.keys().key(&format!("task-ack:{ack}")));
                get
            })
            .await?;
        Ok(match value.as_deref() {
            Some(ACK_OPEN) => None,
            Some(other) => Some(Decided::of(other)),
            None => Some(Decided::Gone),
        })
    }

    /// Decides `ack` for the task's node (`as_owner`) or the sender: the
    /// first to take the open key wins, and both sides read the same
    /// answer. The owner applies a change only when it won; the sender
    /// answers success only when the owner won. A key that expired before
    /// either took it is [`Decided::Gone`]: nobody applies the change.
    pub(crate) async fn decide(&self, ack: &str, as_owner: bool) -> Result<Decided, BusError> {
        let mut eval = ::redis::cmd("EVAL");
        eval.arg(DECIDE_SCRIPT)
            .arg(1)
            .arg(self.keys().key(&format!("task-ack:{ack}")))
            .arg(if as_owner { "owner" } else { "sender" })
            .arg(ACK_OPEN);
        let answer: String = self.keys().query(eval).await?;
        Ok(Decided::of(&answer))
    }

    /// Asks `node` to apply `control` to its task `id` for `owner`, under
    /// the acknowledgement key `ack` (opened first).
    pub(crate) async fn send_control(
        &self,
        node: &str,
        id: &str,
        owner: &str,
        control: Control,
        ack: &str,
    ) -> Result<(), BusError> {
        let mut params = Map::new();
        params.insert("taskId".into(), Value::from(id));
        params.insert("owner".into(), Value::from(owner));
        params.insert("ack".into(), Value::from(ack));
        match control {
            Control::Cancel => {
                params.insert("op".into(), Value::from("cancel"));
            }
            Control::Update(answers) => {
                params.insert("op".into(), Value::from("update"));
                params.insert("inputResponses".into(), Value::Object(answers));
            }
        }
        let msg = SharedNotification::new(Notification::new(CONTROL, params));
        self.bus()
            .publish_remote_wait(&format!("tasks-ctl/{node}"), &[msg])
            .await
    }
}

impl Tasks {
    /// Sends `control` for `record` to its `node` and answers once it is
    /// decided: `Ok` when that node took the acknowledgement key (it applies
    /// the change; this then waits, at most [`COPY_WAIT`], for the copy to
    /// show it), a retryable error when it did not within [`FORWARD_WAIT`]
    /// (this node takes the key: the change is never applied) or Redis
    /// could not be asked.
    pub(super) async fn forward(
        &self,
        node: &str,
        record: &TaskRecord,
        owner: &str,
        control: Control,
    ) -> Result<(), McpError> {
        let Some(remote) = self.remote() else {
            return Err(not_found());
        };
        let ack = random_id();
        remote.open_ack(&ack).await.map_err(|e| unavailable(&e))?;
        let sent = remote
            .send_control(node, &record.id, owner, control, &ack)
            .await;
        let mut decided = None;
        if let Err(e) = &sent {
            // Maybe sent all the same: decided at once, as after a timeout.
            tracing::warn!(task = %record.id, error = %e, "control message not sent");
        } else {
            let until = tokio::time::Instant::now() + FORWARD_WAIT;
            while decided.is_none() && tokio::time::Instant::now() < until {
                tokio::time::sleep(Duration::from_millis(20)).await;
                decided = remote.ack_state(&ack).await.ok().flatten();
            }
        }
        let decided = match decided {
            Some(d) => d,
            None => match remote.decide(&ack, false).await {
                Ok(d) => d,
                Err(e) => {
                    // Unknown whether the owner took it: an error (a retry is
                    // harmless: cancel and update are idempotent).
                    tracing::warn!(task = %record.id, error = %e, "forwarded task change undecided");
                    return Err(McpError::internal(
                        "Internal error: the shared task store is unavailable; the change may not have been applied; retry later",
                    ));
                }
            },
        };
        if decided != Decided::Owner {
            tracing::info!(task = %record.id, node = %node, "forwarded task change not confirmed; not applied");
            return Err(match sent {
                Err(e) => unavailable(&e),
                Ok(()) => not_confirmed(),
            });
        }
        let until = tokio::time::Instant::now() + COPY_WAIT;
        while tokio::time::Instant::now() < until {
            match remote.get(&record.id).await {
                Ok(Some((now, _))) if now.rev > record.rev => break,
                Ok(None) => break,
                _ => {}
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        Ok(())
    }
}

/// Hands the control messages other nodes send for this node's tasks to the
/// one worker that decides and applies them (a full queue drops one: its
/// sender answers a retryable error).
pub(super) struct ControlSink(pub(super) Weak<Shared>);

impl InboxSink<SharedNotification> for ControlSink {
    fn try_deliver(&self, msg: SharedNotification) -> Result<(), InboxError> {
        let Some(shared) = self.0.upgrade() else {
            return Err(InboxError::Closed);
        };
        if let Some(tx) = shared.fleet.controls.get()
            && tx.try_send(msg).is_err()
        {
            tracing::warn!("task control queue full; a forwarded change was dropped");
        }
        Ok(())
    }

    fn deliver(&self, msg: SharedNotification) -> DeliverFuture {
        let done = self.try_deliver(msg);
        Box::pin(async move { done })
    }

    fn is_closed(&self) -> bool {
        self.0.strong_count() == 0
    }
}

/// Applies the control messages, one at a time: each is checked (shape,
/// sizes, a task of this node's, its owner), then its acknowledgement key is
/// taken, and only when this node took it is the change applied.
pub(super) async fn apply_controls(
    remote: SharedTasks,
    shared: Weak<Shared>,
    mut rx: tokio::sync::mpsc::Receiver<SharedNotification>,
) {
    while let Some(msg) = rx.recv().await {
        let Some(strong) = shared.upgrade() else {
            return;
        };
        let tasks = Tasks { shared: strong };
        let Some(control) = parse_control(&msg) else {
            tracing::debug!("malformed task control message ignored");
            continue;
        };
        tasks.apply_control(&remote, control).await;
    }
}

impl Tasks {
    /// Whether this node took `ack` (its claim was not answered): reads the
    /// key until Redis answers, at most as long as the key lives.
    async fn learn_ack(&self, remote: &SharedTasks, ack: &str) -> bool {
        let until = tokio::time::Instant::now() + ACK_LIFE;
        while tokio::time::Instant::now() < until {
            match remote.ack_state(ack).await {
                Ok(Some(decided)) => return decided == Decided::Owner,
                // Still open: nobody took it; take it now.
                Ok(None) => return matches!(remote.decide(ack, true).await, Ok(Decided::Owner)),
                Err(_) => tokio::time::sleep(Duration::from_millis(250)).await,
            }
        }
        false
    }

    async fn apply_control(&self, remote: &SharedTasks, msg: ControlMsg) {
        let ControlMsg {
            id,
            owner,
            control,
            ack,
        } = msg;
        // The sender checked the owner against the copy; checked again here,
        // before anything is decided.
        let Some(record) = self.shared.store.get(&id, seal::now_ms()) else {
            tracing::debug!(task = %id, "control message for an unknown task ignored");
            return;
        };
        if record.owner != owner {
            tracing::debug!(task = %id, "control message for another principal's task ignored");
            return;
        }
        match remote.decide(&ack, true).await {
            Ok(Decided::Owner) => {}
            Ok(_) => {
                tracing::info!(task = %id, "forwarded task change arrived after its sender gave up; not applied");
                return;
            }
            Err(e) => {
                // Unknown whether it was taken; the sender reads the same key
                // (when it reads "owner" it answers success): read it again
                // until Redis answers, for as long as the key can live.
                tracing::warn!(task = %id, error = %e, "forwarded task change not decided");
                if !self.learn_ack(remote, &ack).await {
                    return;
                }
            }
        }
        let applied = match control {
            Control::Cancel => self.cancel(&id, &owner),
            Control::Update(answers) => self.update(&id, &owner, &answers),
        };
        if let Err(e) = applied {
            tracing::debug!(task = %id, error = %e, "control message for a task not applied");
        }
        // The sender waits for the copy to show the change.
        self.copy_now(&id).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn control(params: Value) -> SharedNotification {
        let params = params.as_object().cloned().unwrap_or_default();
        SharedNotification::new(Notification::new(CONTROL, params))
    }

    #[test]
    fn a_control_message_is_read_only_in_its_exact_shape() {
        let ack = "0123456789abcdef0123456789abcdef";
        let ok =
            control(serde_json::json!({"taskId": "t", "owner": "p:a", "op": "cancel", "ack": ack}));
        let read = parse_control(&ok).expect("read");
        assert_eq!(
            (read.id.as_str(), read.owner.as_str(), read.ack.as_str()),
            ("t", "p:a", ack)
        );
        assert!(matches!(read.control, Control::Cancel));
        for bad in [
            serde_json::json!({"taskId": "t", "owner": "p:a", "op": "cancel"}),
            serde_json::json!({"taskId": "t", "owner": "p:a", "op": "cancel", "ack": "../x"}),
            serde_json::json!({"taskId": "t", "owner": "p:a", "op": "cancel", "ack": ack.to_uppercase()}),
            serde_json::json!({"taskId": 7, "owner": "p:a", "op": "cancel", "ack": ack}),
            serde_json::json!({"taskId": "t".repeat(2_000), "owner": "p:a", "op": "cancel", "ack": ack}),
            serde_json::json!({"taskId": "t", "owner": "", "op": "cancel", "ack": ack}),
            serde_json::json!({"taskId": "t", "owner": "p:a", "op": "drop", "ack": ack}),
            serde_json::json!({"taskId": "t", "owner": "p:a", "op": "update", "ack": ack}),
            serde_json::json!({"taskId": "t", "owner": "p:a", "op": "update", "ack": ack, "inputResponses": []}),
        ] {
            assert!(parse_control(&control(bad.clone())).is_none(), "{bad}");
        }
    }
}
