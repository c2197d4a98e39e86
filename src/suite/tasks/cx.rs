//! [`TaskCx`]: what a tool running as a task uses to report a status message,
//! ask the client for input, and see cancellation.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context, Poll};

use serde_json::{Value, json};
use tokio::sync::{Notify, oneshot};

use super::supervisor::Tasks;

/// The cancellation flag of one task.
#[derive(Default)]
pub(crate) struct CancelSignal {
    flag: AtomicBool,
    notify: Notify,
}

impl CancelSignal {
    pub(crate) fn cancel(&self) {
        self.flag.store(true, Ordering::SeqCst);
        self.notify.notify_waiters();
    }

    fn is_set(&self) -> bool {
        self.flag.load(Ordering::SeqCst)
    }
}

/// The handle of a tool call running as a task ([`ToolCall::task`](crate::suite::ToolCall::task)).
///
/// ```no_run
/// # use genmcp::suite::{CallToolResult, ToolBuilder, TaskSupport};
/// # use serde_json::json;
/// let tool = ToolBuilder::new("export")
///     .task_support(TaskSupport::Optional)
///     .handler(|call| async move {
///         if let Some(task) = call.task() {
///             task.set_status_message("exporting");
///             let answer = task
///                 .elicit("Include archived rows?", json!({"type": "object"}))
///                 .await
///                 .ok();
///             if task.is_cancelled() {
///                 return Ok(CallToolResult::text("stopped").into());
///             }
///             let _ = answer;
///         }
///         Ok(CallToolResult::text("done").into())
///     });
/// ```
#[derive(Clone)]
pub struct TaskCx {
    pub(crate) id: String,
    pub(crate) tasks: Tasks,
    pub(crate) cancel: Arc<CancelSignal>,
}

impl std::fmt::Debug for TaskCx {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TaskCx").field("id", &self.id).finish()
    }
}

/// Why an input request got no answer: the task was cancelled, expired or
/// finished before the client answered.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error("the task ended before the client answered")]
pub struct InputGone;

/// The answer to one input request ([`TaskCx::request_input`]): the client's
/// raw response (an `ElicitResult`, `CreateMessageResult` or `ListRootsResult`).
pub struct InputAnswer {
    rx: Option<oneshot::Receiver<Value>>,
}

impl Future for InputAnswer {
    type Output = Result<Value, InputGone>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        match self.rx.as_mut() {
            None => Poll::Ready(Err(InputGone)),
            Some(rx) => Pin::new(rx).poll(cx).map(|r| r.map_err(|_| InputGone)),
        }
    }
}

impl TaskCx {
    /// The task id.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// Sets the task's `statusMessage` (seen by `tasks/get` and listeners).
    pub fn set_status_message(&self, message: impl Into<String>) {
        self.tasks.set_message(&self.id, message.into());
    }

    /// Asks the client for input: the task goes `input_required` with this
    /// request under a new key (unique for the task's life) until the client
    /// answers it with `tasks/update`. The request is registered when this is
    /// called, so several requests made before awaiting are outstanding at
    /// once. `method` is `elicitation/create`, `sampling/createMessage` or
    /// `roots/list`.
    pub fn request_input(&self, method: &str, params: Value) -> InputAnswer {
        InputAnswer {
            rx: self
                .tasks
                .request_input(&self.id, json!({"method": method, "params": params})),
        }
    }

    /// [`TaskCx::request_input`] of a form-mode `elicitation/create`.
    pub fn elicit(&self, message: &str, requested_schema: Value) -> InputAnswer {
        self.request_input(
            "elicitation/create",
            json!({"mode": "form", "message": message, "requestedSchema": requested_schema}),
        )
    }

    /// Whether `tasks/cancel` was called (or the task expired, or the server
    /// is shutting down). Stop soon: after a grace period the work is aborted.
    pub fn is_cancelled(&self) -> bool {
        self.cancel.is_set()
    }

    /// Resolves when the task is cancelled (see [`TaskCx::is_cancelled`]).
    pub async fn cancelled(&self) {
        loop {
            let notified = self.cancel.notify.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            if self.cancel.is_set() {
                return;
            }
            notified.await;
        }
    }
}
